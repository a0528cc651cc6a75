package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

func (a *app) telegramCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "telegram",
		Short: "Pair the Telegram channel with its owner, or unpair it",
		Long: `The Telegram channel (docs/TELEGRAM.md) lets you talk to your agent from
your phone. It answers one person, its owner: set [plugins.telegram.config]
owner_id in config.toml, or pair with carapace telegram pair. To hand the
bot to another Telegram account, carapace telegram pair --replace (or
carapace telegram unpair, then pair).`,
		Example: `  carapace telegram pair
  carapace telegram pair --replace
  carapace telegram unpair`,
	})
	c.AddCommand(a.telegramPairCmd(), a.telegramUnpairCmd())
	return c
}

func (a *app) telegramPairCmd() *cobra.Command {
	var replace bool
	c := &cobra.Command{
		Use:   "pair",
		Short: "Print a one-time code that makes you the Telegram bot's owner",
		Long: `Print a one-time code. Send it to your bot in a private chat, as
/start CODE, within 10 minutes: the sender becomes the owner, the only
person the bot ever answers. The code works once; a wrong, expired or used
code gets no reply at all (the bot answers strangers nothing).

Once the bot has an owner, pairing is off: pair says so and prints no code
(nobody could use it). --replace forgets the paired owner first, so that
the code's sender becomes the new owner; until then the bot answers no
one. An owner_id in config.toml always wins: remove it to pair instead.

The code's hash — never the code — is written to the plugin's data folder
($CARAPACE_HOME/data/telegram/pairing.json, mode 0600). If a core is
running, its Telegram plugin is restarted so that it waits for the code
(it does not start without an owner otherwise).`,
		Example: `  carapace telegram pair
  carapace telegram pair --replace`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.pairTelegram(cmd.Context(), cmd.OutOrStdout(), replace)
		},
	}
	c.Flags().BoolVar(&replace, "replace", false, "forget the paired owner first: the code's sender becomes the new owner")
	return c
}

func (a *app) telegramUnpairCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unpair",
		Short: "Forget the Telegram bot's paired owner: it answers no one until you pair again",
		Long: `Forget the owner a pairing made (kept in the plugin's database,
$CARAPACE_HOME/data/telegram/telegram.sqlite). From then on the bot answers
no one, and the Telegram plugin does not start until someone pairs again
(carapace telegram pair). Messages of the old owner's that wait to be
handed to the agent are dropped; an answer the agent is already working on
still goes to the chat it came from. If a core is running, its Telegram
plugin is restarted so that the change takes effect at once.

An owner_id in config.toml is not a pairing: remove it from
[plugins.telegram.config] instead (carapace config edit).`,
		Example: `  carapace telegram unpair`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.unpairTelegram(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

// telegramOwner says who owns the bot: owner_id in config.toml, which
// wins (fromConfig), else the owner a pairing made; 0 for nobody.
func telegramOwner(ctx context.Context, h home.Dir) (id int64, fromConfig bool, err error) {
	cfg, err := config.Load(h.Config())
	if err != nil {
		return 0, false, err
	}
	if v, ok := cfg.Plugins["telegram"].Config["owner_id"]; ok {
		id, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
		if err != nil || id < 1 {
			return 0, true, fmt.Errorf("config.toml [plugins.telegram.config] owner_id = %v is not a Telegram user id: fix it with carapace config edit", v)
		}
		return id, true, nil
	}
	id, err = pairing.Owner(ctx, h.DataDir("telegram"))
	return id, false, err
}

// pairedOwner returns a client of the home's core, the home and the owner
// a pairing made (0: none). It fails when the owner cannot be told, and
// when config.toml sets one (pairing and unpairing are off then).
func (a *app) pairedOwner(ctx context.Context) (*control.Client, home.Dir, int64, error) {
	c, h, err := a.client()
	if err != nil {
		return nil, "", 0, err
	}
	owner, fromConfig, err := telegramOwner(ctx, h)
	switch {
	case err != nil:
		return nil, "", 0, fmt.Errorf("cannot tell whether the bot has an owner: %w", err)
	case owner != 0 && fromConfig:
		return nil, "", 0, errConfigOwner(owner)
	}
	return c, h, owner, nil
}

// errConfigOwner refuses to pair or unpair over owner_id in config.toml.
func errConfigOwner(id int64) error {
	return fmt.Errorf("the bot's owner is Telegram user %d, set as owner_id in config.toml, which always wins, so pairing is off: "+
		"to have someone else own it, remove owner_id from [plugins.telegram.config] (carapace config edit), then carapace telegram pair", id)
}

// pairTelegram writes a new pairing code, prints it, and has a running
// core restart its Telegram plugin so that the plugin waits for it. While
// the bot has an owner it prints no code, unless replace forgets the
// paired owner first.
func (a *app) pairTelegram(ctx context.Context, out io.Writer, replace bool) error {
	c, h, owner, err := a.pairedOwner(ctx)
	switch {
	case err != nil:
		return err
	case owner != 0 && !replace:
		return fmt.Errorf("the bot already has an owner, Telegram user %d, so pairing is off and a code would be refused: "+
			"to hand the bot to another account, carapace telegram pair --replace (or carapace telegram unpair)", owner)
	case owner != 0:
		if _, err := pairing.Unpair(ctx, h.DataDir("telegram")); err != nil {
			return err
		}
		fmt.Fprintf(out, "Telegram user %d is no longer the owner.\n", owner)
	}
	code, err := pairing.New(h.DataDir("telegram"), time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Send this to your bot in a private chat within %s:\n\n    /start %s\n\n", pairing.TTL, code)
	switch st, err := restartTelegram(ctx, c); {
	case errors.Is(err, control.ErrNotRunning):
		fmt.Fprintln(out, "No core is running: start one (carapace serve) and the plugin will wait for the code.")
	case err != nil:
		fmt.Fprintf(out, "The running core could not restart the Telegram plugin: %s\nRun carapace plugin restart telegram once it is configured (docs/TELEGRAM.md).\n", oneLine(err.Error()))
	case !st.Healthy:
		fmt.Fprintf(out, "The Telegram plugin is not running: %s\n", printable(st.Problem))
	default:
		fmt.Fprintln(out, "The Telegram plugin waits for the code.")
	}
	return nil
}

// unpairTelegram forgets the paired owner and has a running core restart
// its Telegram plugin.
func (a *app) unpairTelegram(ctx context.Context, out io.Writer) error {
	c, h, _, err := a.pairedOwner(ctx)
	if err != nil {
		return err
	}
	was, err := pairing.Unpair(ctx, h.DataDir("telegram"))
	if err != nil {
		return err
	}
	if was == 0 {
		fmt.Fprintln(out, "Nobody is paired: the bot has no owner (carapace telegram pair makes one).")
		return nil
	}
	fmt.Fprintf(out, "Telegram user %d is no longer the owner: the bot answers no one until you pair again (carapace telegram pair).\n", was)
	switch _, err := restartTelegram(ctx, c); {
	case errors.Is(err, control.ErrNotRunning):
	case err != nil:
		fmt.Fprintf(out, "The running core could not restart the Telegram plugin (%s): until carapace plugin restart telegram, it still answers %d.\n", oneLine(err.Error()), was)
	default:
		fmt.Fprintln(out, "The running core's Telegram plugin stopped answering them.")
	}
	return nil
}

// restartTelegram has a running core restart its Telegram plugin, so
// that it reads the owner or the pairing anew.
func restartTelegram(ctx context.Context, c *control.Client) (api.PluginStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.RestartPlugin(ctx, "telegram")
}
