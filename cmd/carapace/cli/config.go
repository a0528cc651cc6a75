package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/atomicfile"
)

func (a *app) configCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "config",
		Short: "Read, check and change config.toml: path, show, get, set, edit, validate, keys",
		Long: `config.toml, in the home, configures the core. Every key is checked: an
unknown one is an error (with the key you probably meant), never a silently
ignored setting. It holds no secrets: credentials are in the credential
store (carapace auth). A running core reads it at start: restart it
(carapace stop, then carapace serve) after a change.`,
		Example: `  carapace config path
  carapace config show
  carapace config get sessions.max_per_group
  carapace config set sessions.max_per_group 2
  carapace config validate`,
	})
	c.AddCommand(a.configPathCmd(), a.configShowCmd(), a.configGetCmd(), a.configValidateCmd(),
		a.configSetCmd(), a.configEditCmd(), configKeysCmd())
	return c
}

// configPathCmd is `config path`.
func (a *app) configPathCmd() *cobra.Command {
	return &cobra.Command{
		Use: "path", Short: "Print where config.toml is", Args: cobra.NoArgs,
		Long:    "Print the path of the home's config.toml (it need not exist: the defaults apply).",
		Example: "  carapace config path",
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.home()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h.Config())
			return nil
		},
	}
}

// configShowCmd is `config show`.
func (a *app) configShowCmd() *cobra.Command {
	return &cobra.Command{
		Use: "show", Short: "Print the effective configuration, defaults filled in", Args: cobra.NoArgs,
		Long:    "Print every setting the core uses, as TOML: what config.toml sets, and the defaults for the rest.",
		Example: "  carapace config show",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.loadConfig()
			if err != nil {
				return err
			}
			b, err := c.Effective()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

// configGetCmd is `config get`.
func (a *app) configGetCmd() *cobra.Command {
	return &cobra.Command{
		Use: "get KEY", Short: "Print one setting, default included", Args: cobra.ExactArgs(1),
		Long:              "Print the value of one setting (a dotted key such as runtime.engine or groups.main.topics), as TOML writes it; its default when config.toml does not set it.",
		Example:           "  carapace config get runtime.engine",
		ValidArgsFunction: completeConfigKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.loadConfig()
			if err != nil {
				return err
			}
			v, err := c.Get(args[0])
			if err != nil {
				return &usageError{err: err}
			}
			fmt.Fprintln(cmd.OutOrStdout(), v)
			return nil
		},
	}
}

// configValidateCmd is `config validate`.
func (a *app) configValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use: "validate [FILE]", Short: "Check config.toml (or FILE) and print every problem with its line", Args: cobra.MaximumNArgs(1),
		Long:    "Check a config file as the core would load it, and print every problem with its line: each unknown key with the key it most likely meant, each value of the wrong type, each value the core refuses. A syntax error is printed alone, since the file cannot be read past it: fix it and validate again. Exit status 1 when there is any problem.",
		Example: "  carapace config validate\n  carapace config validate ./new-config.toml",
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			} else {
				h, err := a.home()
				if err != nil {
					return err
				}
				path = h.Config()
			}
			if _, err := os.Stat(path); err != nil && len(args) == 1 {
				return fmt.Errorf("validate %s: %w", path, err)
			}
			probs, err := configProblems(path)
			if err != nil {
				return fmt.Errorf("validate %s: %w", path, err)
			}
			if len(probs) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", path)
				return nil
			}
			for _, p := range probs {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", path, printable(p))
			}
			return exitCode(1)
		},
	}
}

// configSetCmd is `config set`.
func (a *app) configSetCmd() *cobra.Command {
	return &cobra.Command{
		Use: "set KEY VALUE", Short: "Set one setting in config.toml, checked before it is written", Args: cobra.ExactArgs(2),
		Long: `Set one setting in config.toml: KEY is dotted (runtime.engine,
groups.family.topics, plugins.telegram.config.owner_id), VALUE a TOML value
(3, true, ["a", "b"], "docker") or else taken as a string. The file is
checked as the core would load it before it is written (atomically), and
every other line, comments included, stays as it was. An unknown key is
refused with the key you probably meant. A running core reads config.toml
at start: restart it for the change to take effect.`,
		Example: `  carapace config set sessions.max_per_group 2
  carapace config set runtime.engine docker
  carapace config set groups.family.topics '["message.inbound"]'`,
		ValidArgsFunction: completeConfigKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, h, err := a.client()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(h.Config())
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("read %s: %w", h.Config(), err)
			}
			out, err := config.Set(data, args[0], args[1])
			if err != nil {
				return &usageError{err: err}
			}
			if err := os.MkdirAll(filepath.Dir(h.Config()), 0o700); err != nil {
				return err
			}
			if err := atomicfile.Write(h.Config(), out, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", h.Config(), err)
			}
			v, _ := config.Load(h.Config())
			shown := args[1]
			if v != nil {
				if got, err := v.Get(args[0]); err == nil {
					shown = got
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s = %s in %s\n", args[0], shown, h.Config())
			tellCore(cmd.Context(), cmd.OutOrStdout(), c, out)
			return nil
		},
	}
}

// configEditCmd is `config edit`.
func (a *app) configEditCmd() *cobra.Command {
	return &cobra.Command{
		Use: "edit", Short: "Edit config.toml in $EDITOR; it is checked before it is saved", Args: cobra.NoArgs,
		Long: `Open a copy of config.toml in $VISUAL or $EDITOR (vi if neither is set).
When the editor exits, the copy is checked as the core would load it: if
it loads, it replaces config.toml (atomically, 0600); if not, every problem
is printed with its line, config.toml is left as it was, and the copy is
kept so that you can fix it and run carapace config validate on it. A
running core reads config.toml at start: restart it for changes to take
effect.`,
		Example: "  carapace config edit\n  EDITOR=nano carapace config edit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.home()
			if err != nil {
				return err
			}
			return editConfig(cmd, h)
		},
	}
}

// editConfig has the user edit a copy of h's config.toml and puts the copy
// in its place if it loads.
func editConfig(cmd *cobra.Command, h home.Dir) error {
	data, err := os.ReadFile(h.Config())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", h.Config(), err)
	}
	tmp, err := editCopy(h, data)
	if err != nil {
		return err
	}
	editor := cmp.Or(os.Getenv("VISUAL"), os.Getenv("EDITOR"), "vi")
	// The editor may be "code --wait": run it through the shell, the file
	// a positional parameter (never spliced into the line).
	ed := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$1"`, "carapace-config-edit", tmp)
	ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := ed.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("the editor (%s) failed: %w; config.toml is unchanged", editor, err)
	}
	probs, err := configProblems(tmp)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return fmt.Errorf("config.toml is unchanged: your edit would not load:\n%s\nyour edit is kept in %s (fix it, then carapace config validate %s and move it into place)",
			strings.Join(probs, "\n"), tmp, tmp)
	}
	edited, err := os.ReadFile(tmp)
	os.Remove(tmp)
	if err != nil {
		return err
	}
	if string(edited) == string(data) {
		fmt.Fprintln(cmd.OutOrStdout(), "config.toml is unchanged")
		return nil
	}
	if err := atomicfile.Write(h.Config(), edited, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", h.Config(), err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s\n", h.Config())
	tellCore(cmd.Context(), cmd.OutOrStdout(), control.NewClient(h.ControlSocket()), edited)
	return nil
}

// editCopy writes data to a new private file beside h's config.toml, for
// the editor, and returns its path.
func editCopy(h home.Dir, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(h.Config()), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(h.Config()), "config.*.toml")
	if err != nil {
		return "", err
	}
	tmp.Close()
	if err := atomicfile.Write(tmp.Name(), data, 0o600); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// configKeysCmd is `config keys`.
func configKeysCmd() *cobra.Command {
	return &cobra.Command{
		Use: "keys", Short: "List every key config.toml may set", Args: cobra.NoArgs,
		Long:    "List every key config.toml may set; * stands for a name you choose (a group, a plugin). docs and the comments of carapace setup's config.toml say what each does.",
		Example: "  carapace config keys",
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, k := range config.Keys() {
				fmt.Fprintln(cmd.OutOrStdout(), k)
			}
			return nil
		},
	}
}

// configProblems checks the config file at path as the core would load it
// and returns its problems, one line each (none if it loads).
func configProblems(path string) ([]string, error) {
	probs, err := config.Validate(path)
	if err != nil {
		return nil, err
	}
	msgs := make([]string, len(probs))
	for i, p := range probs {
		msgs[i] = p.String()
	}
	return msgs, nil
}

// tellCore says whether a running core uses config.toml as it now is
// (data): the core reads it only at start, so a change waits for a
// restart. Without a running core it says nothing: the next one reads it.
func tellCore(ctx context.Context, out io.Writer, c *control.Client, data []byte) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	st, err := c.Status(ctx)
	switch {
	case err != nil:
	case st.ConfigDigest == config.Digest(data):
		fmt.Fprintf(out, "The running core (pid %d) already uses config.toml as it is now.\n", st.PID)
	default:
		fmt.Fprintf(out, "The running core (pid %d) reads config.toml only when it starts: restart it for this to take effect: carapace stop && carapace serve\n", st.PID)
	}
}

// loadConfig loads the home's config.toml.
func (a *app) loadConfig() (*config.Config, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	return config.Load(h.Config())
}

// completeConfigKey completes the keys config.toml may set.
func completeConfigKey(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range config.Keys() {
		if !strings.Contains(k, "*") {
			out = append(out, k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
