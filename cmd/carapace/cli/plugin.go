package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugindir"
	"github.com/carapace-dev/carapace/core/scaffold"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/core/version"
)

// sdkDir is the Carapace source tree this binary was built from, for the
// replace directive of a new plugin's go.mod. The Makefile stamps it:
//
//	-ldflags "-X github.com/carapace-dev/carapace/cmd/carapace/cli.sdkDir=$(CURDIR)"
//
// A stamped folder that is no longer a Carapace source tree is ignored.
var sdkDir string

// SDKEnv names a Carapace source tree for `carapace plugin create`.
const SDKEnv = "CARAPACE_SDK"

// restartTimeout bounds a plugin restart: draining in-flight calls (up to
// the 30 s handler timeout), shutting down (10 s) and starting (10 s).
const restartTimeout = 90 * time.Second

func (a *app) pluginCmd() *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:   "plugin",
		Short: "Create, check, build, install and manage plugins",
		Long: `A plugin is a folder: manifest.json (its tools, their risk levels and
argument schemas), a handler executable built from Go with the Carapace SDK
(it runs as its own process, holds the plugin's credentials and does the
work), and skills/*.md (which teach the agent the tools).

The usual cycle:

  carapace plugin create weather     a new plugin that builds and passes its tests
  make test                          its tests, without a core
  carapace plugin build .            build ./handler and validate the plugin
  carapace plugin install .          copy it into $CARAPACE_HOME/plugins and pin the handler's SHA-256
  carapace plugin list               what is installed, and how each plugin is doing

The core starts an installed plugin only while its handler still has the
pinned hash.`,
		Example: `  carapace plugin create weather --tool weather_forecast
  carapace plugin validate ./weather
  carapace plugin install --link ./weather
  carapace plugin restart weather`,
	})
	c.AddCommand(a.pluginCreateCmd(), a.pluginValidateCmd(), a.pluginBuildCmd(), a.pluginInstallCmd(),
		a.pluginRemoveCmd(), a.pluginListCmd(), a.pluginShowCmd(), a.pluginRestartCmd())
	return c
}

func (a *app) pluginCreateCmd() *cobra.Command {
	var tool, risk, parent, sdk string
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a new plugin that builds, tests and validates as it is",
		Long: `Create the folder PARENT/NAME (PARENT is --dir, else the current folder)
holding a plugin with one example tool: manifest.json, main.go and
handler.go (a handler that calls plugin.Serve), handler_test.go (tests on
the plugin test harness), skills/NAME.md, a Makefile (build, test,
validate, install), go.mod, .gitignore and a README. The folder must not
exist or be empty.

NAME is the plugin's name, kebab-case ("my-plugin"). The tool is --tool,
else "<NAME in snake_case>_example"; tool names are snake_case. --risk high
makes every call of the tool wait for the user's approval.

The plugin's go.mod requires the Carapace SDK. Until the SDK is published
it needs a replace directive naming a Carapace source tree: --sdk DIR, else
$` + SDKEnv + `, else the tree this carapace was built from (make build
records it). With one, create also runs go mod tidy; without one it says
what to add.`,
		Example: `  carapace plugin create weather
  carapace plugin create weather --tool weather_forecast --risk low
  carapace plugin create mailer --tool send_email --risk high --dir ~/src
  carapace plugin create weather --sdk ~/src/carapace`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := manifest.CheckPluginName(name); err != nil {
				return usagef("%v", err)
			}
			if tool != "" {
				if err := manifest.CheckToolName(tool); err != nil {
					return usagef("--tool: %v", err)
				}
			}
			if risk != manifest.RiskLow && risk != manifest.RiskHigh {
				return usagef("--risk %q: want low or high", risk)
			}
			sdk, sdkNote, err := resolveSDK(sdk)
			if err != nil {
				return err
			}
			dir := filepath.Join(parent, name)
			out := cmd.OutOrStdout()
			err = scaffold.Create(dir, scaffold.Options{Name: name, Tool: tool, Risk: risk, SDKDir: sdk})
			if errors.Is(err, scaffold.ErrInvalid) {
				return &usageError{err: err}
			}
			if _, ok := errors.AsType[*scaffold.TidyError](err); !ok && err != nil {
				return err
			}
			fmt.Fprintf(out, "created plugin %s in %s:\n", name, dir)
			files := scaffold.Files(name)
			if _, serr := os.Stat(filepath.Join(dir, "go.sum")); serr == nil {
				files = append(files, "go.sum")
			}
			for _, f := range files {
				fmt.Fprintf(out, "  %s\n", f)
			}
			if te, ok := errors.AsType[*scaffold.TidyError](err); ok {
				// After the list of what exists: go's own words, then ours.
				fmt.Fprint(cmd.ErrOrStderr(), strings.TrimRight(te.Output, "\n")+"\n")
				return fmt.Errorf("the plugin is written, but go mod tidy failed in %s (%v): fix its go.mod, then run go mod tidy there", dir, te.Err)
			}
			if sdk != "" {
				fmt.Fprintf(out, "go.mod uses the Carapace SDK in %s (%s)\n", sdk, sdkNote)
			} else {
				fmt.Fprintf(out, "note: no Carapace source tree was given, and the SDK is not published yet: add\n"+
					"  replace %s => /path/to/carapace\n"+
					"to %s (or run create again with --sdk DIR or $%s), then run go mod tidy there\n",
					scaffold.SDKModule, filepath.Join(dir, "go.mod"), SDKEnv)
			}
			if _, lerr := exec.LookPath("go"); lerr != nil {
				fmt.Fprintf(out, "note: go is not on PATH: install Go %s or later, then run go mod tidy in %s\n", scaffold.GoVersion, dir)
			}
			fmt.Fprintf(out, "next steps:\n  cd %s\n  make test\n  carapace plugin build .\n  carapace plugin install .\n", dir)
			return nil
		},
	}
	c.Flags().StringVar(&tool, "tool", "", `the example tool's name, snake_case (default "<NAME in snake_case>_example")`)
	c.Flags().StringVar(&risk, "risk", manifest.RiskLow, "the tool's risk level: low, or high (every call waits for the user's approval)")
	c.Flags().StringVar(&parent, "dir", ".", "the folder to create the plugin in")
	c.Flags().StringVar(&sdk, "sdk", "", "a Carapace source tree for go.mod's replace directive (default $"+SDKEnv+", else the tree carapace was built from)")
	return c
}

// resolveSDK picks the SDK folder for create: the flag, else $CARAPACE_SDK,
// else the stamped sdkDir if it is still a Carapace tree, else none. It
// returns the folder and where it came from.
func resolveSDK(flag string) (dir, from string, err error) {
	if flag != "" {
		d, err := scaffold.CheckSDK(flag)
		if err != nil {
			return "", "", &usageError{err: fmt.Errorf("--sdk: %w", err)}
		}
		return d, "--sdk", nil
	}
	if env := os.Getenv(SDKEnv); env != "" {
		d, err := scaffold.CheckSDK(env)
		if err != nil {
			return "", "", &usageError{err: fmt.Errorf("$%s: %w", SDKEnv, err)}
		}
		return d, "$" + SDKEnv, nil
	}
	if sdkDir != "" {
		if d, err := scaffold.CheckSDK(sdkDir); err == nil {
			return d, "the tree carapace was built from", nil
		}
	}
	return "", "", nil
}

func (a *app) pluginValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PATH",
		Short: "Check a plugin folder as the core will before loading it",
		Long: `Check the plugin folder PATH: manifest.json is valid JSON and matches the
manifest schema; tool names are snake_case, unique and not reserved; every
arguments_schema is a strict JSON Schema (additionalProperties: false);
skills/ holds at least one .md file, and the skill files match the tools;
high-risk tools are pointed out; the handler is built, a regular executable
file.

Every problem is printed as "error: ..." or "warning: ..." with its file,
its JSON pointer and how to fix it. The last line sums up. The exit status
is 1 if there is any error, 0 otherwise (warnings alone do not fail).`,
		Example: `  carapace plugin validate .
  carapace plugin validate ~/src/weather`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := checkPlugin(cmd.OutOrStdout(), args[0], a.cfg.Version, true)
			if r.errors > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
}

// checkReport sums up a check of a plugin folder.
type checkReport struct {
	manifest         *manifest.Manifest
	tools            int
	errors, warnings int
}

// checkPlugin checks the plugin folder dir (manifest, skills, handler) and
// prints every problem to w; with summary, a last line sums up.
func checkPlugin(w io.Writer, dir, appVersion string, summary bool) checkReport {
	var r checkReport
	m, problems := manifest.Check(dir, manifest.Options{AppVersion: version.Semver(appVersion)})
	problems = append(problems, install.CheckLayout(dir)...)
	for _, p := range problems {
		if p.Warning {
			r.warnings++
		} else {
			r.errors++
		}
		printProblem(w, p)
	}
	r.tools = declaredTools(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		if err := skills.CheckName(filepath.Base(abs)); err != nil {
			// The folder name becomes the plugin's (unless installed with
			// --name) and its skill's: Claude Code would refuse this one.
			r.warnings++
			fmt.Fprintf(w, "warning: %s: the agent would not be taught this plugin's tools: %s. Fix: install it under another name (carapace plugin install --name NAME)\n", printable(dir), printable(err.Error()))
		}
	}
	if m != nil {
		r.manifest = m
		r.tools = len(m.Provides.Tools)
		for _, sw := range skills.Check(m, os.DirFS(filepath.Join(dir, install.SkillsDir))) {
			r.warnings++
			loc := filepath.Join(dir, sw.File)
			if sw.Line > 0 {
				loc = fmt.Sprintf("%s:%d", loc, sw.Line)
			}
			fmt.Fprintf(w, "warning: %s: %s\n", printable(loc), printable(sw.Message))
		}
	}
	if summary {
		fmt.Fprintf(w, "%s: %d %s, %d %s, %d %s\n", printable(dir), r.tools, plural(r.tools, "tool"),
			r.errors, plural(r.errors, "error"), r.warnings, plural(r.warnings, "warning"))
	}
	return r
}

// declaredTools counts the tools a manifest declares, even one with
// errors, for the summary; 0 if it cannot tell.
func declaredTools(dir string) int {
	path := filepath.Join(dir, install.ManifestFile)
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return 0 // a FIFO would block the open; a link, Check reports
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var doc struct {
		Provides struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"provides"`
	}
	if json.NewDecoder(io.LimitReader(f, manifest.MaxSize)).Decode(&doc) != nil {
		return 0
	}
	return len(doc.Provides.Tools)
}

// printProblem prints one problem: severity, file, pointer and message,
// then the fix on a line of its own. Everything is made printable: a
// manifest's text is the plugin author's, not ours.
func printProblem(w io.Writer, p manifest.Problem) {
	sev := "error"
	if p.Warning {
		sev = "warning"
	}
	loc := p.File
	if p.Pointer != "" {
		loc += ": " + p.Pointer
	}
	fmt.Fprintf(w, "%s: %s: %s\n", sev, printable(loc), printable(p.Message))
	if p.Fix != "" {
		fmt.Fprintf(w, "  fix: %s\n", printable(p.Fix))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func (a *app) pluginBuildCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "build PATH",
		Short: "Build a plugin's handler and validate the plugin",
		Long: `Build the handler of the plugin folder PATH, a Go module that calls
plugin.Serve: run "go build -trimpath -o handler ." there with
CGO_ENABLED=0 (a static binary without local paths), showing the
compiler's output, then validate the plugin as carapace plugin validate
does, and print the handler's size and SHA-256.

If PATH is installed as a link (carapace plugin install --link), its pin is
updated to the new handler; carapace plugin restart NAME then loads it.`,
		Example: `  carapace plugin build .
  carapace plugin build ~/src/weather && carapace plugin install --replace ~/src/weather`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if fi, err := os.Stat(dir); err != nil {
				return err
			} else if !fi.IsDir() {
				return fmt.Errorf("%s is not a folder", dir)
			}
			goBin, err := exec.LookPath("go")
			if err != nil {
				return fmt.Errorf("go is not on PATH: install Go %s or later to build plugins", scaffold.GoVersion)
			}
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "building %s: CGO_ENABLED=0 go build -trimpath -o handler .\n", dir)
			b := exec.CommandContext(cmd.Context(), goBin, "build", "-trimpath", "-o", install.HandlerFile, ".")
			b.Dir = dir
			b.Env = append(os.Environ(), "CGO_ENABLED=0")
			b.Stdout, b.Stderr = stderr, stderr
			if err := b.Run(); err != nil {
				return fmt.Errorf("go build in %s failed: %w", dir, err)
			}
			out := cmd.OutOrStdout()
			r := checkPlugin(out, dir, a.cfg.Version, true)
			handler := filepath.Join(dir, install.HandlerFile)
			fi, err := os.Stat(handler)
			if err != nil {
				return err
			}
			sum, err := install.HashFile(handler)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "built %s: %s, sha256 %s\n", printable(handler), size(fi.Size()), sum)
			if err := a.repinLinked(out, dir); err != nil {
				return err
			}
			if r.errors > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
}

// repinLinked updates the pins of the plugins installed as links to dir.
func (a *app) repinLinked(w io.Writer, dir string) error {
	h, err := a.home()
	if err != nil {
		return err
	}
	pins, err := install.LoadPins(h)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(pins) {
		p := pins[name]
		if !p.Linked || !sameDir(p.Source, dir) {
			continue
		}
		if _, err := install.VerifyPin(h, name); err == nil {
			continue // the build changed nothing
		}
		np, err := install.Repin(h, name)
		if err != nil {
			return fmt.Errorf("update the pin of linked plugin %s: %w", name, err)
		}
		fmt.Fprintf(w, "updated the pin of %s, installed as a link to %s (sha256 %s): carapace plugin restart %s loads it\n",
			name, printable(p.Source), np.SHA256, name)
	}
	return nil
}

// sameDir reports whether a and b name the same folder.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// size formats a byte count.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func (a *app) pluginInstallCmd() *cobra.Command {
	var name string
	var link, replace bool
	c := &cobra.Command{
		Use:   "install PATH",
		Short: "Install a built plugin and pin its handler",
		Long: `Install the plugin folder PATH as $CARAPACE_HOME/plugins/NAME, where NAME is
--name or PATH's folder name (kebab-case). The plugin must validate without
errors and its handler must be built (carapace plugin build PATH).

Only manifest.json, the handler and skills/*.md are copied, into a
temporary folder that is renamed into place, so a running core never sees
half a plugin. Symbolic links in PATH are refused, never followed. With
--link, plugins/NAME is a symbolic link to PATH instead, for development:
carapace plugin build PATH then updates its pin.

The SHA-256 of the handler is recorded in $CARAPACE_HOME/pins.json; the
core starts the plugin only while its handler still has that hash.

If a core is running, the plugin is loaded at once and its state printed;
otherwise it loads at the next carapace serve. An installed plugin of the
same name is replaced only with --replace.`,
		Example: `  carapace plugin install .
  carapace plugin install ~/src/weather --replace
  carapace plugin install --link . --name weather-dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if name != "" {
				if err := manifest.CheckPluginName(name); err != nil {
					return usagef("--name: %v", err)
				}
			} else {
				abs, err := filepath.Abs(src)
				if err != nil {
					return err
				}
				if err := manifest.CheckPluginName(filepath.Base(abs)); err != nil {
					return usagef("%v: the plugin's name is its folder's name; pass --name NAME to choose another", err)
				}
				name = filepath.Base(abs)
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r := checkPlugin(out, src, a.cfg.Version, false); r.errors > 0 {
				return fmt.Errorf("%s is not a valid plugin: %d %s (see above)", src, r.errors, plural(r.errors, "error"))
			}
			pin, err := install.Install(h, src, install.Options{Name: name, Link: link, Replace: replace, AppVersion: version.Semver(a.cfg.Version)})
			if err != nil {
				return err
			}
			how := "copied from"
			if pin.Linked {
				how = "linked to"
			}
			fmt.Fprintf(out, "installed %s (%s %s) in %s\n", name, how, printable(pin.Source), printable(filepath.Join(h.PluginsDir(), name)))
			fmt.Fprintf(out, "pinned handler sha256 %s in %s\n", pin.SHA256, printable(h.Pins()))
			return a.loadInCore(cmd, h, name)
		},
	}
	c.Flags().StringVar(&name, "name", "", "the plugin's name (default PATH's folder name)")
	c.Flags().BoolVar(&link, "link", false, "link plugins/NAME to PATH instead of copying it (development)")
	c.Flags().BoolVar(&replace, "replace", false, "replace an installed plugin of the same name")
	return c
}

// loadInCore asks a running core to (re)load plugin name after an
// installation and prints the outcome. No core is not an error.
func (a *app) loadInCore(cmd *cobra.Command, h home.Dir, name string) error {
	out := cmd.OutOrStdout()
	ctx, cancel := context.WithTimeout(cmd.Context(), restartTimeout)
	defer cancel()
	st, err := control.NewClient(h.ControlSocket()).RestartPlugin(ctx, name)
	if errors.Is(err, control.ErrNotRunning) {
		fmt.Fprintf(out, "no core is running at %s: %s loads at the next carapace serve\n", printable(string(h)), name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s is installed, but the running core could not load it: %w (try carapace plugin restart %s)", name, err, name)
	}
	printState(out, st)
	if !healthy(st) {
		return fmt.Errorf("%s is installed, but it failed to start in the running core: %s (fix it, then carapace plugin restart %s)",
			name, describeFailure(st), name)
	}
	return nil
}

func (a *app) pluginRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Uninstall a plugin",
		Long: `Uninstall plugin NAME: delete $CARAPACE_HOME/plugins/NAME and its pin, and
unload it from the running core, if any. A plugin installed with --link
loses only its link; the folder it pointed to is untouched.

The plugin's data ($CARAPACE_HOME/data/NAME) and its credentials are kept,
so reinstalling it finds them again. Delete them yourself if you want them
gone: rm -rf $CARAPACE_HOME/data/NAME, and carapace auth delete --plugin
NAME --key KEY for each key carapace auth status --plugin NAME lists.`,
		Example:           `  carapace plugin remove weather`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completePlugin,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := manifest.CheckPluginName(name); err != nil {
				return usagef("%v", err)
			}
			h, err := a.home()
			if err != nil {
				return err
			}
			pins, err := install.LoadPins(h)
			if err != nil {
				return err
			}
			if err := install.Remove(h, name); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if p, ok := pins[name]; ok && p.Linked {
				fmt.Fprintf(out, "removed %s (the link to %s; that folder is untouched) and its pin\n", name, printable(p.Source))
			} else {
				fmt.Fprintf(out, "removed %s and its pin\n", name)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), restartTimeout)
			defer cancel()
			switch _, err := control.NewClient(h.ControlSocket()).RestartPlugin(ctx, name); {
			case err == nil:
				fmt.Fprintf(out, "unloaded %s from the running core\n", name)
			case errors.Is(err, control.ErrNotRunning), errors.Is(err, api.ErrNotFound):
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "carapace: warning: the running core could not unload %s: %s (carapace plugin restart %s retries)\n",
					name, oneLine(err.Error()), name)
			}
			data := h.DataDir(name)
			if _, err := os.Stat(data); err == nil {
				fmt.Fprintf(out, "kept its data in %s: delete it with rm -rf %s\n", printable(data), printable(data))
			}
			fmt.Fprintf(out, "kept its credentials, if any: list them with carapace auth status --plugin %s, "+
				"delete each with carapace auth delete --plugin %s --key KEY\n", name, name)
			return nil
		},
	}
}

func (a *app) pluginRestartCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Reload a plugin from disk in the running core",
		Long: `Reload plugin NAME in the running core: let its in-flight calls finish,
shut it down, and load it again from disk (its manifest, skills and
handler, which must still match its pin). A plugin installed since the
core started is loaded; one removed since is unloaded. Prints the plugin's
state; the exit status is 1 if it failed to start, with the reason.`,
		Example:           `  carapace plugin restart weather`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completePlugin,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := manifest.CheckPluginName(name); err != nil {
				return usagef("%v", err)
			}
			c, _, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), restartTimeout)
			defer cancel()
			st, err := c.RestartPlugin(ctx, name)
			if errors.Is(err, api.ErrNotFound) {
				return fmt.Errorf("the running core has no plugin %s, and none is installed (carapace plugin list): %w", name, err)
			}
			if err != nil {
				return err
			}
			printState(cmd.OutOrStdout(), st)
			if !healthy(st) && st.State != "removed" {
				return fmt.Errorf("%s failed to start: %s", name, describeFailure(st))
			}
			return nil
		},
	}
}

// completePlugin completes plugin names: the running core's, else the
// user plugins on disk.
func (a *app) completePlugin(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, h, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	var names []string
	if st, err := c.Status(ctx); err == nil {
		for _, p := range st.Plugins {
			names = append(names, p.Name)
		}
	} else if inv, err := plugindir.Scan(plugindir.Options{Home: h, Version: a.cfg.Version}); err == nil {
		for _, p := range inv.Plugins {
			if manifest.CheckPluginName(p.Name) == nil {
				names = append(names, p.Name)
			}
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// healthy reports whether a plugin status is a healthy one.
func healthy(st api.PluginStatus) bool {
	return st.Healthy || st.State == "healthy"
}

// state names a plugin's state.
func state(st api.PluginStatus) string {
	switch {
	case st.State != "":
		return st.State
	case st.Healthy:
		return "healthy"
	}
	return "failed"
}

// describeFailure says why a plugin is not healthy, and, for one the
// core starts again after a crash, when.
func describeFailure(st api.PluginStatus) string {
	var parts []string
	for _, s := range []string{st.Category, st.Problem} {
		if s != "" {
			parts = append(parts, printable(s))
		}
	}
	if len(parts) == 0 {
		return state(st) + revivalNote(st, time.Now())
	}
	return strings.Join(parts, ": ") + revivalNote(st, time.Now())
}

// revivalNote says when a restarting plugin is tried next and how often
// the core has started it again; "" for any other.
func revivalNote(st api.PluginStatus, now time.Time) string {
	var notes []string
	if st.State == api.PluginRestarting && !st.NextTry.IsZero() {
		if wait := st.NextTry.Sub(now).Round(time.Second); wait > 0 {
			notes = append(notes, "next try in "+wait.String())
		} else {
			notes = append(notes, "next try now")
		}
	}
	if st.Restarts > 0 {
		notes = append(notes, fmt.Sprintf("started again %d %s by the core", st.Restarts, plural(st.Restarts, "time")))
	}
	if len(notes) == 0 {
		return ""
	}
	return " [" + strings.Join(notes, "; ") + "]"
}

// printState prints one plugin's state after a restart.
func printState(w io.Writer, st api.PluginStatus) {
	switch {
	case healthy(st):
		detail := ""
		if len(st.Tools) > 0 {
			detail = ", tools: " + printable(strings.Join(st.Tools, ", "))
		}
		if st.PID > 0 {
			detail += fmt.Sprintf(", pid %d", st.PID)
		}
		fmt.Fprintf(w, "%s: healthy%s\n", printable(st.Name), detail)
	case st.State == "removed":
		fmt.Fprintf(w, "%s: unloaded (no longer installed)\n", printable(st.Name))
	default:
		fmt.Fprintf(w, "%s: %s: %s\n", printable(st.Name), state(st), describeFailure(st))
	}
}

func (a *app) pluginListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the plugins and their state",
		Long: `With a running core, list every plugin it knows, built-in and user: name,
state (healthy, degraded, failed, restarting, down, ...), source, version,
tools and handler pid; for a plugin that is not healthy, the reason follows
the table. A plugin whose handler died or hung is "restarting": the core
starts it again after a wait (its next try follows the reason); one that
crashed too often in a short time is "down" until carapace plugin restart.

Without a running core, list the user plugins on disk instead, judged as
the core judges them when it loads them: whether each is valid (its folder
and its manifest; carapace plugin validate checks more, the skills too),
whether its handler is pinned and still matches its pin, and whether it is
installed as a link. Built-in plugins are listed only by a running core.`,
		Example: `  carapace plugin list
  carapace plugin list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, h, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			st, err := c.Status(ctx)
			if errors.Is(err, control.ErrNotRunning) {
				return a.listOnDisk(cmd, h, asJSON)
			}
			if err != nil {
				return err
			}
			return listRunning(cmd.OutOrStdout(), st.Plugins, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the plugins as JSON")
	return c
}

// confined is a plugin's confinement in a word: "yes", "NO" (the user's
// [plugins.NAME] unconfined = true), "-" in the core (built-in). carapace
// plugin show NAME says what it may reach.
func confined(p api.PluginStatus) string {
	switch {
	case p.Confinement == nil:
		return "-"
	case p.Confinement.Mode == api.ConfinementUnconfined:
		return "NO"
	}
	return "yes"
}

// toolsWidth is how much of a plugin's tool list a table shows.
const toolsWidth = 40

// listRunning prints the plugins of a running core.
func listRunning(w io.Writer, plugins []api.PluginStatus, asJSON bool) error {
	if asJSON {
		if plugins == nil {
			plugins = []api.PluginStatus{}
		}
		return writeJSON(w, plugins)
	}
	if len(plugins) == 0 {
		fmt.Fprintln(w, "no plugins")
		return nil
	}
	tw := table(w)
	fmt.Fprintln(tw, "NAME\tSTATE\tSOURCE\tVERSION\tTOOLS\tPID\tCONFINED")
	var failed []api.PluginStatus
	for _, p := range plugins {
		pid := "-"
		if p.PID > 0 {
			pid = fmt.Sprint(p.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(p.Name), printable(state(p)), orDash(p.Source), orDash(p.Version),
			orDash(truncate(strings.Join(p.Tools, ","), toolsWidth)), pid, confined(p))
		if !healthy(p) {
			failed = append(failed, p)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range failed {
		fmt.Fprintf(w, "%s %s: %s\n", printable(p.Name), printable(state(p)), describeFailure(p))
	}
	return nil
}

// diskPlugin is a user plugin as found on disk.
type diskPlugin struct {
	Name       string   `json:"name"`
	Dir        string   `json:"dir"`
	Version    string   `json:"version,omitempty"`
	Tools      []string `json:"tools,omitempty"`
	Valid      bool     `json:"valid"`
	Problems   []string `json:"problems,omitempty"` // the errors, when not valid
	Pinned     bool     `json:"pinned"`
	PinMatches bool     `json:"pin_matches"`
	PinProblem string   `json:"pin_problem,omitempty"`
	Linked     bool     `json:"linked"`
	Source     string   `json:"source,omitempty"` // where it was installed from
	Missing    bool     `json:"missing,omitempty"`
}

// listOnDisk prints the user plugins in h's plugins folder.
func (a *app) listOnDisk(cmd *cobra.Command, h home.Dir, asJSON bool) error {
	list, err := scanPlugins(h, a.cfg.Version)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(cmd.ErrOrStderr(), "no core is running at %s: listing the user plugins in %s; built-in plugins are listed only by a running core (carapace serve)\n",
		printable(string(h)), printable(h.PluginsDir()))
	if asJSON {
		return writeJSON(out, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(out, "no user plugins installed")
		return nil
	}
	tw := table(out)
	fmt.Fprintln(tw, "NAME\tVERSION\tTOOLS\tVALID\tPIN\tLINKED")
	for _, p := range list {
		valid := "yes"
		switch {
		case p.Missing:
			valid = "missing"
		case !p.Valid:
			valid = fmt.Sprintf("no (%d %s)", len(p.Problems), plural(len(p.Problems), "error"))
		}
		pin := "ok"
		switch {
		case !p.Pinned:
			pin = "none"
		case p.Missing:
			pin = "stale"
		case !p.PinMatches:
			pin = "MISMATCH"
		}
		linked := "no"
		if p.Linked {
			linked = "-> " + printable(p.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(p.Name), orDash(p.Version),
			orDash(truncate(strings.Join(p.Tools, ","), toolsWidth)), valid, pin, linked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range list {
		for _, msg := range p.Problems {
			fmt.Fprintf(out, "%s: error: %s\n", printable(p.Name), printable(msg))
		}
		if p.PinProblem != "" {
			fmt.Fprintf(out, "%s: %s\n", printable(p.Name), printable(p.PinProblem))
		}
	}
	return nil
}

// scanPlugins describes the user plugins of h, and the pins whose plugin
// is gone, sorted by name, as the inventory (core/plugindir) judges them:
// the core's judgment, which it makes when it loads them.
func scanPlugins(h home.Dir, appVersion string) ([]diskPlugin, error) {
	inv, err := plugindir.Scan(plugindir.Options{Home: h, Version: appVersion})
	if err != nil {
		return nil, err
	}
	if inv.PinsErr != nil {
		return nil, inv.PinsErr
	}
	list := make([]diskPlugin, 0, len(inv.Plugins))
	for _, p := range inv.Plugins {
		list = append(list, describeOnDisk(p))
	}
	return list, nil
}

// describeOnDisk is the listing of one inventoried user plugin; it hashes
// the handler of a pinned one.
func describeOnDisk(p plugindir.Plugin) diskPlugin {
	d := diskPlugin{Name: p.Name, Dir: p.Dir, Linked: p.Linked, Source: cmp.Or(p.Pin.Source, p.LinkTarget),
		Pinned: p.Pin.SHA256 != "", Missing: p.Stale}
	if p.Stale {
		d.PinProblem = p.Problem.Error()
		return d
	}
	if p.Problem != nil {
		d.Problems = append(d.Problems, p.Problem.Error())
	}
	if me, ok := errors.AsType[*manifest.Error](p.ManifestErr); ok {
		for _, pr := range me.Problems {
			d.Problems = append(d.Problems, pr.String())
		}
	} else if p.ManifestErr != nil {
		d.Problems = append(d.Problems, p.ManifestErr.Error())
	}
	if m := p.Manifest; m != nil {
		d.Version = m.Version
		for _, t := range m.Provides.Tools {
			d.Tools = append(d.Tools, t.Name)
		}
	}
	d.Valid = len(d.Problems) == 0
	switch {
	case d.Pinned:
		if err := p.VerifyPin(); err != nil {
			d.PinProblem = err.Error()
		} else {
			d.PinMatches = true
		}
	case d.Valid && p.PinErr != nil:
		d.PinProblem = p.PinErr.Error()
	}
	return d
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
