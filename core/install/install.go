// Package install puts user plugins into $CARAPACE_HOME/plugins and takes
// them out again, and keeps pins.json, the SHA-256 of every installed
// handler, which the core checks before it starts one.
//
// Installing copies exactly what a plugin needs at run time, manifest.json,
// the handler executable and skills/*.md, into a temporary folder inside
// the plugins folder, checks the copy, and renames it into place, so the
// core never sees half a plugin. Nothing is ever followed out of the
// source: a symbolic link where a file should be is refused, so a plugin
// folder cannot smuggle, say, ~/.ssh/id_ed25519 in as a skill file that
// would be mounted into the agent's container. Assets a handler needs at
// run time belong in the binary (go:embed) or its data folder.
//
// A development install (Options.Link) makes plugins/<name> a symbolic
// link to the source folder instead; it is pinned the same way, and
// Repin re-pins it after a rebuild.
//
// Removing deletes plugins/<name> (a link is removed as a link, never its
// target) and its pin. It never touches the plugin's data folder
// (home.Dir.DataDir) or its credentials: those are the user's to delete.
//
// Every plugin name is checked with manifest.CheckPluginName before it is
// used in a path, and every change takes a lock on the plugins folder.
package install

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/manifest"
)

// Files of a plugin folder.
const (
	ManifestFile = "manifest.json" // the manifest
	HandlerFile  = "handler"       // the handler executable
	SkillsDir    = "skills"        // the skill files, *.md
)

// Size limits of the files an installation copies.
const (
	maxManifest = 1 << 20   // manifest.json
	maxSkill    = 1 << 20   // one skill file
	maxHandler  = 512 << 20 // the handler executable
)

// Errors of Install, Remove and Repin; the errors returned wrap them.
var (
	// ErrExists: plugins/<name> exists and Options.Replace is not set.
	ErrExists = errors.New("already installed")
	// ErrNotInstalled: there is no plugins/<name> and no pin for it.
	ErrNotInstalled = errors.New("not installed")
	// ErrNotBuilt: the source has no handler, or one that is not a regular
	// executable file.
	ErrNotBuilt = errors.New("handler not built")
	// ErrBadName: the plugin name is not a valid plugin name.
	ErrBadName = errors.New("invalid plugin name")
	// ErrBadSource: the source folder cannot be installed as it is.
	ErrBadSource = errors.New("cannot install from this folder")
)

// Options control Install.
type Options struct {
	// Name is the plugin's name; "" means the base name of the source.
	Name string
	// Link makes plugins/<name> a symbolic link to the source folder (for
	// development) instead of a copy.
	Link bool
	// Replace allows replacing an installed plugin of the same name.
	Replace bool
	// AppVersion is this Carapace's version, for the manifest's app_compat
	// check (see manifest.Options).
	AppVersion string
}

// InvalidError is returned when a source's manifest has errors; Problems
// holds every problem found, warnings included.
type InvalidError struct {
	Dir      string
	Problems []manifest.Problem
}

// Error lists the errors, one per line.
func (e *InvalidError) Error() string {
	var b strings.Builder
	n := 0
	for _, p := range e.Problems {
		if !p.Warning {
			n++
		}
	}
	fmt.Fprintf(&b, "%s is not a valid plugin (%d %s; see carapace plugin validate %s):", e.Dir, n, plural(n, "error"), e.Dir)
	for _, p := range e.Problems {
		if !p.Warning {
			b.WriteString("\n  ")
			b.WriteString(p.String())
		}
	}
	return b.String()
}

// Unwrap returns ErrBadSource.
func (e *InvalidError) Unwrap() error { return ErrBadSource }

// Install installs the plugin folder src into h's plugins folder and pins
// its handler, returning the pin. See the package documentation.
func Install(h home.Dir, src string, opts Options) (Pin, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return Pin{}, fmt.Errorf("install %s: %w", src, err)
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	if err := checkName(name); err != nil {
		return Pin{}, fmt.Errorf("install %s: %w", src, err)
	}
	if err := checkSource(h, abs); err != nil {
		return Pin{}, err
	}
	if _, problems := manifest.Check(abs, manifest.Options{AppVersion: opts.AppVersion}); hasErrors(problems) {
		return Pin{}, &InvalidError{Dir: src, Problems: problems}
	}
	if err := checkHandler(abs, src); err != nil {
		return Pin{}, err
	}

	if err := ensureDir(h); err != nil {
		return Pin{}, err
	}
	unlock, err := lockDir(h.PluginsDir())
	if err != nil {
		return Pin{}, fmt.Errorf("install %s: %w", name, err)
	}
	defer unlock()
	cleanStale(h.PluginsDir())
	dst := filepath.Join(h.PluginsDir(), name)
	if _, err := os.Lstat(dst); err == nil && !opts.Replace {
		return Pin{}, fmt.Errorf("plugin %s: %w at %s (pass --replace to replace it)", name, ErrExists, dst)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Pin{}, fmt.Errorf("install %s: %w", name, err)
	}
	pins, err := LoadPins(h)
	if err != nil {
		return Pin{}, err
	}

	staging, err := os.MkdirTemp(h.PluginsDir(), installPrefix+name+"-")
	if err != nil {
		return Pin{}, fmt.Errorf("install %s: %w", name, err)
	}
	defer os.RemoveAll(staging) // never follows links: a linked old plugin loses only its link
	next := filepath.Join(staging, "new")
	pin := Pin{Name: name, Source: abs, Linked: opts.Link, Installed: time.Now().UTC().Truncate(time.Second)}
	if opts.Link {
		if pin.SHA256, err = HashFile(filepath.Join(abs, HandlerFile)); err != nil {
			return Pin{}, fmt.Errorf("install %s: %w", name, err)
		}
		if err := os.Symlink(abs, next); err != nil {
			return Pin{}, fmt.Errorf("install %s: %w", name, err)
		}
	} else {
		if pin.SHA256, err = copyPlugin(abs, next); err != nil {
			return Pin{}, fmt.Errorf("install %s: copy %s: %w", name, src, err)
		}
		// Check what is installed, not what was read a moment ago.
		if _, problems := manifest.Check(next, manifest.Options{AppVersion: opts.AppVersion}); hasErrors(problems) {
			return Pin{}, fmt.Errorf("install %s: %s changed while it was being installed; try again: %w", name, src, ErrBadSource)
		}
	}

	old := filepath.Join(staging, "old")
	moved := false
	if err := os.Rename(dst, old); err == nil {
		moved = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Pin{}, fmt.Errorf("install %s: move the installed plugin aside: %w", name, err)
	}
	restore := func() {
		if moved {
			_ = os.Rename(old, dst)
		}
	}
	if err := os.Rename(next, dst); err != nil {
		restore()
		return Pin{}, fmt.Errorf("install %s: %w", name, err)
	}
	pins[name] = pin
	if err := savePins(h, pins); err != nil {
		_ = os.Rename(dst, next)
		restore()
		return Pin{}, fmt.Errorf("install %s: %w", name, err)
	}
	return pin, nil
}

// Repin re-hashes the handler of plugin name, which must have been
// installed with Options.Link, and updates its pin: after a rebuild of a
// linked development plugin the old pin no longer matches. A copied
// plugin's handler never changes, so Repin refuses one.
func Repin(h home.Dir, name string) (Pin, error) {
	if err := checkName(name); err != nil {
		return Pin{}, fmt.Errorf("repin: %w", err)
	}
	if err := ensureDir(h); err != nil {
		return Pin{}, err
	}
	unlock, err := lockDir(h.PluginsDir())
	if err != nil {
		return Pin{}, fmt.Errorf("repin %s: %w", name, err)
	}
	defer unlock()
	pins, err := LoadPins(h)
	if err != nil {
		return Pin{}, err
	}
	pin, ok := pins[name]
	if !ok {
		return Pin{}, fmt.Errorf("plugin %s: %w", name, ErrNotInstalled)
	}
	if !pin.Linked {
		return Pin{}, fmt.Errorf("plugin %s is a copy, not a link: install it again to update it", name)
	}
	dst := filepath.Join(h.PluginsDir(), name)
	if fi, err := os.Lstat(dst); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return Pin{}, fmt.Errorf("plugin %s: %s is no longer a link: install it again", name, dst)
	}
	if pin.SHA256, err = HashFile(filepath.Join(dst, HandlerFile)); err != nil {
		return Pin{}, fmt.Errorf("repin %s: %w", name, err)
	}
	pin.Installed = time.Now().UTC().Truncate(time.Second)
	pins[name] = pin
	if err := savePins(h, pins); err != nil {
		return Pin{}, fmt.Errorf("repin %s: %w", name, err)
	}
	return pin, nil
}

// Remove deletes plugins/<name> and its pin. name is checked before any
// file is touched; a symbolic link is removed as a link, never its target.
// The plugin's data folder and credentials are kept.
func Remove(h home.Dir, name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	dir := filepath.Clean(h.PluginsDir())
	dst := filepath.Join(dir, name)
	if filepath.Dir(dst) != dir || filepath.Base(dst) != name {
		// Unreachable for a valid name; a guard for the one operation
		// that deletes.
		return fmt.Errorf("remove %q: %w", name, ErrBadName)
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin %s: %w", name, ErrNotInstalled)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	defer unlock()
	cleanStale(dir)
	pins, err := LoadPins(h)
	if err != nil {
		return err
	}
	_, pinned := pins[name]
	_, lerr := os.Lstat(dst)
	exists := lerr == nil
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, lerr)
	}
	if !exists && !pinned {
		return fmt.Errorf("plugin %s: %w (carapace plugin list shows the installed plugins)", name, ErrNotInstalled)
	}
	var staging string
	if exists {
		// Move it aside first so that it disappears at once, whole.
		if staging, err = os.MkdirTemp(dir, removePrefix+name+"-"); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		defer os.RemoveAll(staging) // unlinks links, never follows them
		if err := os.Rename(dst, filepath.Join(staging, name)); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	if pinned {
		delete(pins, name)
		if err := savePins(h, pins); err != nil {
			if exists {
				_ = os.Rename(filepath.Join(staging, name), dst)
			}
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	if exists {
		if err := os.RemoveAll(staging); err != nil {
			return fmt.Errorf("remove %s: the plugin is uninstalled, but deleting its files failed: %w (delete %s yourself)", name, err, staging)
		}
	}
	return nil
}

// VerifyPin checks that the handler of installed plugin name still has its
// pinned hash, returning the pin. It fails with ErrNotInstalled when the
// plugin has no pin.
func VerifyPin(h home.Dir, name string) (Pin, error) {
	if err := checkName(name); err != nil {
		return Pin{}, err
	}
	pins, err := LoadPins(h)
	if err != nil {
		return Pin{}, err
	}
	pin, ok := pins[name]
	if !ok {
		return Pin{}, fmt.Errorf("plugin %s has no pin: %w", name, ErrNotInstalled)
	}
	return pin, pin.Verify(filepath.Join(h.PluginsDir(), name))
}

// Verify checks that the handler in the plugin folder dir still hashes to
// the pin (see HashFile for what that does and does not prove).
func (p Pin) Verify(dir string) error {
	sum, err := HashFile(filepath.Join(dir, HandlerFile))
	if err != nil {
		return err
	}
	if sum != p.SHA256 {
		return fmt.Errorf("plugin %s: the handler's SHA-256 is %s, not the pinned %s (reinstall it)", p.Name, sum, p.SHA256)
	}
	return nil
}

// Prefixes of the temporary folders Install and Remove make in the plugins
// folder; the core skips names that start with a dot.
const (
	installPrefix = ".install-"
	removePrefix  = ".remove-"
)

// cleanStale deletes the temporary folders an interrupted Install or Remove
// left in the plugins folder dir. It runs under the lock, which every
// Install and Remove holds while its temporary folder exists, so any such
// folder it finds is stale. Failures are ignored: the folders are
// invisible to the core, and the next call tries again.
func cleanStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() && (strings.HasPrefix(n, installPrefix) || strings.HasPrefix(n, removePrefix)) {
			_ = os.RemoveAll(filepath.Join(dir, n)) // never follows links
		}
	}
}

// checkName wraps manifest.CheckPluginName's error in ErrBadName.
func checkName(name string) error {
	if err := manifest.CheckPluginName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrBadName, err)
	}
	return nil
}

// ensureDir creates the home and its plugins folder if need be.
func ensureDir(h home.Dir) error {
	for _, d := range []string{string(h), h.PluginsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// checkSource fails unless abs is a folder outside h's plugins folder whose
// manifest and skills are files and folders of its own.
func checkSource(h home.Dir, abs string) error {
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("install %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("install %s: not a folder: %w", abs, ErrBadSource)
	}
	if inside(abs, h.PluginsDir()) {
		return fmt.Errorf("install %s: the folder is inside the plugins folder %s; install from your source folder: %w", abs, h.PluginsDir(), ErrBadSource)
	}
	if fi, err := os.Lstat(filepath.Join(abs, ManifestFile)); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("install %s: %s must be a regular file, not a symbolic link or anything else: %w", abs, ManifestFile, ErrBadSource)
	}
	skills := filepath.Join(abs, SkillsDir)
	fi, err = os.Lstat(skills)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("install %s: %w", abs, err)
	case !fi.IsDir():
		return fmt.Errorf("install %s: %s must be a folder, not a symbolic link or a file: %w", abs, SkillsDir, ErrBadSource)
	}
	entries, err := os.ReadDir(skills)
	if err != nil {
		return fmt.Errorf("install %s: %w", abs, err)
	}
	for _, e := range entries {
		if isSkill(e.Name()) && !e.Type().IsRegular() {
			return fmt.Errorf("install %s: %s/%s must be a regular file, not a symbolic link or anything else (copy the file itself in): %w",
				abs, SkillsDir, e.Name(), ErrBadSource)
		}
	}
	return nil
}

// inside reports whether path is dir or inside it, symbolic links resolved.
func inside(path, dir string) bool {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// checkHandler fails with ErrNotBuilt unless abs/handler is a regular
// executable file. src is the folder as the user named it, for the advice.
func checkHandler(abs, src string) error {
	path := filepath.Join(abs, HandlerFile)
	fi, err := os.Lstat(path)
	advice := fmt.Sprintf("run `carapace plugin build %s` first", src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s has no handler: %w: %s", src, ErrNotBuilt, advice)
	case err != nil:
		return fmt.Errorf("install %s: %w", src, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s/%s is a symbolic link; the handler must be the executable itself: %w: %s", src, HandlerFile, ErrNotBuilt, advice)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s/%s is not a regular file: %w: %s", src, HandlerFile, ErrNotBuilt, advice)
	case fi.Mode().Perm()&0o100 == 0:
		return fmt.Errorf("%s/%s is not executable: %w: %s", src, HandlerFile, ErrNotBuilt, advice)
	}
	return nil
}

// copyPlugin copies manifest.json, handler and skills/*.md from src into
// the new folder dst and returns the handler's SHA-256. It follows no
// symbolic link below src.
func copyPlugin(src, dst string) (string, error) {
	root, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := os.Mkdir(dst, 0o700); err != nil {
		return "", err
	}
	if _, err := copyFile(root, ManifestFile, filepath.Join(dst, ManifestFile), 0o600, maxManifest); err != nil {
		return "", err
	}
	sum, err := copyFile(root, HandlerFile, filepath.Join(dst, HandlerFile), 0o700, maxHandler)
	if err != nil {
		return "", err
	}
	skills, err := openDirAt(root, SkillsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return sum, nil
	}
	if err != nil {
		return "", err
	}
	defer skills.Close()
	entries, err := skills.ReadDir(-1)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dst, SkillsDir), 0o700); err != nil {
		return "", err
	}
	for _, e := range entries {
		if !isSkill(e.Name()) {
			continue
		}
		if _, err := copyFile(skills, e.Name(), filepath.Join(dst, SkillsDir, e.Name()), 0o600, maxSkill); err != nil {
			return "", err
		}
	}
	return sum, nil
}

// copyFile copies the regular file name in dir to the new file to with
// mode, and returns the SHA-256 of what it copied.
func copyFile(dir *os.File, name, to string, mode os.FileMode, limit int64) (string, error) {
	in, err := openFileAt(dir, name)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if mode&0o100 != 0 {
		if fi, err := in.Stat(); err != nil {
			return "", err
		} else if fi.Mode().Perm()&0o100 == 0 {
			return "", fmt.Errorf("%s is not executable: %w", in.Name(), ErrNotBuilt)
		}
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%s is larger than %d bytes", in.Name(), limit)
	}
	if err == nil {
		err = out.Chmod(mode) // whatever the umask
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isSkill reports whether a file name is a skill file's.
func isSkill(name string) bool {
	return strings.HasSuffix(name, ".md") && !strings.HasPrefix(name, ".")
}

// hasErrors reports whether problems holds an error (not only warnings).
func hasErrors(problems []manifest.Problem) bool {
	for _, p := range problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// CheckLayout checks what Install needs of the plugin folder dir beyond
// what manifest.Check checks: manifest.json is a regular file, not even a
// symbolic link within the folder (installation follows none), and the
// handler is a regular executable file. A handler that does not exist yet
// is a warning; every other problem is an error. File in the problems is
// dir joined with the file's name, as in manifest.Check's.
func CheckLayout(dir string) []manifest.Problem {
	var out []manifest.Problem
	add := func(file, msg, fix string, warning bool) {
		out = append(out, manifest.Problem{File: filepath.Join(dir, file), Message: msg, Fix: fix, Warning: warning})
	}
	if fi, err := os.Lstat(filepath.Join(dir, ManifestFile)); err == nil && !fi.Mode().IsRegular() {
		add(ManifestFile, "is "+describe(fi.Mode())+", not a regular file, and installation follows no link",
			"replace it with the file itself", false)
	}
	build := "run carapace plugin build " + dir
	fi, err := os.Lstat(filepath.Join(dir, HandlerFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add(HandlerFile, "not built yet", build, true)
	case err != nil:
		add(HandlerFile, "cannot be read: "+err.Error(), build, false)
	case !fi.Mode().IsRegular():
		add(HandlerFile, "is "+describe(fi.Mode())+", not the executable itself", build, false)
	case fi.Mode().Perm()&0o100 == 0:
		add(HandlerFile, "is not executable", build, false)
	}
	return out
}

// describe names the kind of file a mode is.
func describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}
