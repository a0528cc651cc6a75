package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

func (a *app) telegramCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "telegram",
		Short: "Pair the Telegram channel with its owner",
		Long: `The Telegram channel (docs/TELEGRAM.md) lets you talk to your agent from
your phone. It answers one person, its owner: set [plugins.telegram.config]
owner_id in config.toml, or pair with carapace telegram pair.`,
		Example: `  carapace telegram pair`,
	})
	c.AddCommand(a.telegramPairCmd())
	return c
}

func (a *app) telegramPairCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pair",
		Short: "Print a one-time code that makes you the Telegram bot's owner",
		Long: `Print a one-time code. Send it to your bot in a private chat, as
/start CODE, within 10 minutes: the sender becomes the owner, the only
person the bot ever answers. The code works once; a wrong, expired or used
code gets no reply at all (the bot answers strangers nothing).

The code's hash — never the code — is written to the plugin's data folder
($CARAPACE_HOME/data/telegram/pairing.json, mode 0600). If a core is
running, its Telegram plugin is restarted so that it waits for the code
(it does not start without an owner otherwise). An owner_id in config.toml
wins over pairing.`,
		Example: `  carapace telegram pair`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.pairTelegram(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

// pairTelegram writes a new pairing code, prints it, and has a running
// core restart its Telegram plugin so that the plugin waits for it.
func (a *app) pairTelegram(ctx context.Context, out io.Writer) error {
	c, h, err := a.client()
	if err != nil {
		return err
	}
	code, err := pairing.New(h.DataDir("telegram"), time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Send this to your bot in a private chat within %s:\n\n    /start %s\n\n", pairing.TTL, code)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	st, err := c.RestartPlugin(ctx, "telegram")
	switch {
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
