package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/service"
)

func (a *app) serviceCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "service",
		Short: "Run the core in the background without the app: install, uninstall, status",
		Long: `Run the core (carapace serve) as your background service, for machines
without the menu-bar app: a systemd user unit on Linux
(~/.config/systemd/user/carapace.service; its log is the user journal,
journalctl --user -u carapace.service), the LaunchAgent dev.carapace.serve
on macOS (~/Library/LaunchAgents; its log ~/Library/Logs/Carapace/serve.log).
It starts at login and is restarted when it fails, not when you stop it
with carapace stop. On Linux, to keep it running while you are logged out:
loginctl enable-linger.`,
		Example: "  carapace service install\n  carapace service status\n  carapace service uninstall",
	})
	c.AddCommand(
		a.serviceActionCmd("install", "Install the service and start it (again, if it runs)"),
		a.serviceActionCmd("uninstall", "Stop the service and remove it"),
		a.serviceActionCmd("status", "Say whether the service is installed, current and running"),
	)
	return c
}

func (a *app) serviceActionCmd(verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:     verb,
		Short:   short,
		Long:    short + ". See carapace service --help.",
		Example: "  carapace service " + verb,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := a.service()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			out := cmd.OutOrStdout()
			switch verb {
			case "install":
				if err := svc.Install(ctx); err != nil {
					return err
				}
				fmt.Fprintf(out, "installed %s and started it\nlogs: %s\n", svc.File(), svc.Logs())
			case "uninstall":
				if err := svc.Uninstall(ctx); err != nil {
					return err
				}
				fmt.Fprintf(out, "removed %s\n", svc.File())
			default:
				st, err := svc.Status(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s: %s\n", st.File, st.Detail)
				if st.Installed && !st.Current {
					fmt.Fprintln(out, "it differs from what this carapace would install (another binary or home): carapace service install rewrites it")
				}
				if st.Installed {
					fmt.Fprintf(out, "logs: %s\n", st.Logs)
				}
			}
			return nil
		},
	}
}

// service returns the background service of this binary and home.
func (a *app) service() (*service.Service, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("service: find the carapace binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("service: find the carapace binary: %w", err)
	}
	user, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("service: find your home directory: %w", err)
	}
	abs, err := filepath.Abs(string(h))
	if err != nil {
		return nil, err
	}
	if def := filepath.Join(user, ".carapace"); runtime.GOOS == "darwin" && filepath.Clean(abs) != def {
		return nil, fmt.Errorf("service: the LaunchAgent runs the default home %s, not %s: run it without --home and %s", def, abs, home.Env)
	}
	return service.New(service.Options{GOOS: runtime.GOOS, Carapace: exe, Home: abs, UserHome: user,
		ConfigHome: os.Getenv("XDG_CONFIG_HOME"), UID: os.Getuid(), Run: a.cfg.ServiceRunner})
}
