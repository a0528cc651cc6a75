// Package plugindir is the inventory of a Carapace home's plugins: the
// built-ins compiled into the core, the bundled plugins shipped beside it,
// and the folders the user installed in $CARAPACE_HOME/plugins — and, for
// each, the state it is in: whether its folder's name is a plugin name,
// whether it is a folder, whether it is a link (carapace plugin install
// --link) and to where, its manifest, its handler's pin, and which plugin
// of the same name it replaces.
//
// The core's loader (core/loader) loads what Scan lists and what Find
// finds; the command line (carapace plugin list, carapace doctor) shows the
// same judgment without a core. One judgment of a folder, so the two
// cannot disagree about it.
//
// The rules, in the order they apply:
//
//   - Names starting with "." in the plugins folder are skipped: they are
//     core/install's temporary folders (and editors' files).
//   - The folder's name is the plugin's identity: a name that is not a
//     plugin name (manifest.CheckPluginName) is a Problem.
//   - A symbolic link is followed (that is how --link installs a plugin);
//     a link to nothing, or to something that is not a folder, is a
//     Problem. An entry that vanishes while it is looked at (a plugin being
//     removed) is not listed.
//   - A user plugin replaces the bundled or built-in plugin of its name
//     (Hides); a bundled one replaces a built-in.
//   - A user plugin needs a pin in pins.json; one copied in by hand has
//     none (ErrUnpinned). A pin whose folder is gone is listed as Stale.
//
// The inventory only reads. Installing, removing and pinning are
// core/install's. Scan parses manifests but does not hash handlers:
// VerifyPin does, for a listing; the core leaves it to core/pluginhost,
// which checks the pin right before every start.
package plugindir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/version"
)

// Source says where a plugin comes from.
type Source string

// Sources, as the control API reports them.
const (
	SourceBuiltin Source = "builtin" // compiled into the core
	SourceBundled Source = "bundled" // shipped beside the core, pinned at build
	SourceUser    Source = "user"    // a folder in $CARAPACE_HOME/plugins, pinned at install
)

// ErrUnpinned is wrapped by Plugin.PinErr for a user plugin that pins.json
// does not pin: it was copied into the plugins folder, never installed.
var ErrUnpinned = errors.New("not pinned")

// Builtin is a plugin compiled into the core, as the inventory sees it.
type Builtin struct {
	Name     string
	Manifest []byte // its manifest.json
}

// Bundled is a first-party plugin shipped with the build that runs out of
// process: a plugin folder beside the carapace binary, and the handler's
// SHA-256, fixed when the core was built.
type Bundled struct {
	Name   string
	Dir    string
	SHA256 string // hex
}

// Options say what to take stock of.
type Options struct {
	Home home.Dir
	// Version is the core's, for the manifests' app_compat.
	Version string
	// Builtins are the plugins compiled into the core, and Bundled the
	// bundled plugins to consider (the loader leaves out those config.toml
	// does not enable). The command line, which knows neither, passes
	// none.
	Builtins []Builtin
	Bundled  []Bundled
}

// Plugin is one plugin of the inventory and the state it is in.
type Plugin struct {
	Name   string
	Source Source
	// Dir is the plugin's folder: plugins/<name> for a user plugin (the
	// link itself when it is linked), the shipped folder for a bundled
	// one; "" for a built-in, or a stale pin of an invalid name.
	Dir string
	// Linked: plugins/<name> is a symbolic link (install --link); for a
	// stale pin, the pin says it was. LinkTarget is where the link
	// points, as it reads.
	Linked     bool
	LinkTarget string
	// Hides is the source of the plugin of the same name that this one
	// replaces; "" if none.
	Hides Source
	// Problem says why the plugin cannot be loaded at all: its folder's
	// name is not a plugin name, it is not a folder, it is a link to
	// nothing, or (Stale) it is gone. Manifest is nil then.
	Problem error
	// Manifest is the parsed manifest; nil when there is a Problem or
	// ManifestErr says why it does not load (a *manifest.Error listing
	// every error).
	Manifest    *manifest.Manifest
	ManifestErr error
	// Pin is what the handler must hash to: pins.json's for a user
	// plugin, the build's for a bundled one; zero for a built-in. PinErr
	// says why a plugin that needs a pin has none (ErrUnpinned, or
	// pins.json is unreadable).
	Pin    install.Pin
	PinErr error
	// Stale: pins.json pins the plugin, but its folder is gone.
	Stale bool
}

// Err is the first reason the core cannot load the plugin, judging by its
// folder alone: Problem, ManifestErr, then PinErr; nil if it can try.
func (p *Plugin) Err() error {
	for _, err := range []error{p.Problem, p.ManifestErr, p.PinErr} {
		if err != nil {
			return err
		}
	}
	return nil
}

// VerifyPin hashes the handler and compares it with the pin: nil when it
// matches. It reads the whole handler. A built-in has no handler to check.
func (p *Plugin) VerifyPin() error {
	switch {
	case p.Source == SourceBuiltin:
		return nil
	case p.PinErr != nil:
		return p.PinErr
	case p.Stale:
		return p.Problem
	}
	return p.Pin.Verify(p.Dir)
}

// Inventory is what Scan found.
type Inventory struct {
	// Plugins are sorted by name, one per name (see Hides), the stale
	// pins of names no plugin has included.
	Plugins []Plugin
	// PinsErr says why pins.json could not be read; every user plugin
	// then has it in its PinErr.
	PinsErr error
}

// Scan takes stock of every plugin. It fails only when the plugins folder
// exists but cannot be listed.
func Scan(o Options) (Inventory, error) {
	s := newScanner(o)
	byName := map[string]Plugin{}
	for _, b := range o.Builtins {
		byName[b.Name] = s.builtin(b)
	}
	for _, b := range o.Bundled {
		byName[b.Name] = hide(byName, s.bundled(b))
	}
	entries, err := os.ReadDir(o.Home.PluginsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Inventory{}, fmt.Errorf("read the plugins folder: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // install's temporary folders, editors' files
		}
		if p, ok := s.user(e.Name()); ok {
			byName[p.Name] = hide(byName, p)
		}
	}
	for name, pin := range s.pins {
		if _, ok := byName[name]; !ok {
			byName[name] = s.stale(name, pin)
		}
	}
	inv := Inventory{PinsErr: s.pinsErr, Plugins: make([]Plugin, 0, len(byName))}
	for _, p := range byName {
		inv.Plugins = append(inv.Plugins, p)
	}
	slices.SortFunc(inv.Plugins, func(a, b Plugin) int { return strings.Compare(a.Name, b.Name) })
	return inv, nil
}

// Find takes stock of plugin name alone, as Scan would list it: the user's
// folder, else the bundled plugin, else the built-in. false if there is
// none, or name is not a plugin name.
func Find(o Options, name string) (Plugin, bool) {
	if manifest.CheckPluginName(name) != nil {
		return Plugin{}, false
	}
	s := newScanner(o)
	var found []Plugin
	for _, b := range o.Builtins {
		if b.Name == name {
			found = append(found, s.builtin(b))
		}
	}
	for _, b := range o.Bundled {
		if b.Name == name {
			found = append(found, s.bundled(b))
		}
	}
	if p, ok := s.user(name); ok {
		found = append(found, p)
	}
	if len(found) == 0 {
		return Plugin{}, false
	}
	p := found[len(found)-1]
	if len(found) > 1 {
		p.Hides = found[len(found)-2].Source
	}
	return p, true
}

// hide records in p which plugin of its name it replaces.
func hide(byName map[string]Plugin, p Plugin) Plugin {
	if old, ok := byName[p.Name]; ok {
		p.Hides = old.Source
	}
	return p
}

// scanner holds what one Scan or Find reads once.
type scanner struct {
	o       Options
	mopts   manifest.Options
	pins    map[string]install.Pin
	pinsErr error
}

func newScanner(o Options) *scanner {
	s := &scanner{o: o, mopts: manifest.Options{AppVersion: version.Semver(o.Version)}}
	s.pins, s.pinsErr = install.LoadPins(o.Home)
	return s
}

func (s *scanner) builtin(b Builtin) Plugin {
	p := Plugin{Name: b.Name, Source: SourceBuiltin}
	p.Manifest, p.ManifestErr = manifest.Parse(b.Name+"/manifest.json (built in)", b.Manifest, s.mopts)
	return p
}

func (s *scanner) bundled(b Bundled) Plugin {
	p := Plugin{Name: b.Name, Source: SourceBundled, Dir: b.Dir, Pin: install.Pin{Name: b.Name, SHA256: b.SHA256}}
	fi, err := os.Stat(b.Dir)
	switch {
	case err != nil:
		p.Problem = fmt.Errorf("the %s plugin shipped with Carapace is missing from %s (reinstall Carapace, or make build): %w", b.Name, b.Dir, err)
	case !fi.IsDir():
		p.Problem = fmt.Errorf("the %s plugin shipped with Carapace is missing from %s, which is not a folder (reinstall Carapace, or make build)", b.Name, b.Dir)
	default:
		p.Manifest, p.ManifestErr = manifest.Load(b.Dir, s.mopts)
	}
	if b.SHA256 == "" {
		p.PinErr = fmt.Errorf("the %s plugin shipped with Carapace has no pin in this build: rebuild it with make build", b.Name)
	}
	return p
}

// user judges plugins/<name>; false if there is no such entry (any more).
func (s *scanner) user(name string) (Plugin, bool) {
	dir := filepath.Join(s.o.Home.PluginsDir(), name)
	p := Plugin{Name: name, Source: SourceUser, Dir: dir}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, false
	}
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		p.Linked = true
		p.LinkTarget, _ = os.Readlink(dir)
	}
	nameErr := manifest.CheckPluginName(name)
	switch {
	case nameErr != nil:
		p.Problem = fmt.Errorf("the folder name is the plugin's identity: %w", nameErr)
	case err != nil:
		p.Problem = fmt.Errorf("cannot read %s: %w", dir, err)
	default:
		p.Problem = folderProblem(dir, p.LinkTarget, p.Linked)
	}
	if p.Problem == nil {
		p.Manifest, p.ManifestErr = manifest.Load(dir, s.mopts)
	}
	switch pin, ok := s.pins[name]; {
	case s.pinsErr != nil:
		p.PinErr = fmt.Errorf("the handler pins cannot be read, so no user plugin starts: %w", s.pinsErr)
	case ok:
		p.Pin = pin
	default:
		p.PinErr = fmt.Errorf("%w: %s was put in the plugins folder by hand, never installed with carapace plugin install, so the core will not start it: "+
			"carapace plugin remove %s, then carapace plugin install its source folder", ErrUnpinned, name, name)
	}
	return p, true
}

// folderProblem says why dir, which exists, is not a plugin folder; nil if
// it is one (following a link).
func folderProblem(dir, target string, linked bool) error {
	fi, err := os.Stat(dir)
	switch {
	case linked && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s is a symbolic link to %s, which does not exist: install the plugin again, or carapace plugin remove %s", dir, target, filepath.Base(dir))
	case err != nil:
		return fmt.Errorf("cannot read %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	return nil
}

// stale lists a pin whose folder is gone.
func (s *scanner) stale(name string, pin install.Pin) Plugin {
	p := Plugin{Name: name, Source: SourceUser, Pin: pin, Linked: pin.Linked, Stale: true}
	if err := manifest.CheckPluginName(name); err != nil {
		p.Problem = fmt.Errorf("pins.json pins %q, which is not a plugin name: %w (delete it from %s)", name, err, s.o.Home.Pins())
		return p
	}
	p.Dir = filepath.Join(s.o.Home.PluginsDir(), name)
	p.Problem = fmt.Errorf("pinned, but its folder is gone: carapace plugin remove %s drops the pin", name)
	return p
}
