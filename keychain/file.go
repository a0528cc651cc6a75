package keychain

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// Modes of the file store.
const (
	dirMode  = 0o700
	fileMode = 0o600
)

// pluginsDir is the directory under the store's root holding one
// directory per plugin.
const pluginsDir = "plugins"

// tempPrefix starts the names of files being written. '~' is not allowed
// in a key, so a temporary file can never be taken for a credential.
const tempPrefix = "tmp~"

// FileStore keeps credentials in files: <dir>/plugins/<plugin>/<key>, one
// value per file, files 0600 and directories 0700, owned by the current
// user. It is the store everywhere but on macOS (see Default) and needs a
// Unix system.
//
// Below dir, every path is walked one component at a time with
// O_NOFOLLOW (openat), so a symbolic link anywhere under dir is refused,
// never followed: a plugin directory linked to another plugin's cannot
// hand one plugin the other's secrets, whatever happens to the tree
// between two calls. dir itself may be reached through links.
//
// Get refuses a file that is not a regular file, is not owned by the
// current user, has any group or other permission bit, or is larger than
// MaxValueSize. Set writes a temporary file in the plugin's directory,
// syncs it, renames it over the old value and syncs the directory, so a
// reader sees the old value or the new one, never a mix, and a crash
// leaves one of the two.
type FileStore struct {
	dir string
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the file store rooted at dir,
// $CARAPACE_HOME/credentials. Nothing is created until a value is set.
func NewFileStore(dir string) *FileStore {
	return &FileStore{dir: dir}
}

// String says where the store keeps credentials.
func (s *FileStore) String() string {
	return "files under " + s.dir
}

// path is the file of a credential, for messages.
func (s *FileStore) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir, pluginsDir}, elem...)...)
}

// errMissing: a directory on the way to a credential does not exist.
var errMissing = errors.New("missing")

// openRoot opens the store's root directory, following links (the home
// may be reached through one). With create it makes the root (0700) if it
// is missing and fixes its mode.
func (s *FileStore) openRoot(create bool) (int, error) {
	if create {
		if err := os.MkdirAll(s.dir, dirMode); err != nil {
			return -1, fmt.Errorf("create credential directory: %w", err)
		}
	}
	fd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, errMissing
	}
	if err != nil {
		return -1, fmt.Errorf("open credential directory %s: %w", s.dir, err)
	}
	if create {
		if err := fixMode(fd, s.dir, dirMode); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// openDir opens the directory name in parent without following a link.
// With create it makes the directory (0700) if it is missing and fixes
// its mode; without, a missing directory is errMissing.
func openDir(parent int, name, path string, create bool) (int, error) {
	if create {
		if err := unix.Mkdirat(parent, name, dirMode); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("create %s: %w", path, err)
		}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, openError(parent, name, path, err)
	}
	if create {
		if err := fixMode(fd, path, dirMode); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// openPluginDir opens the directory of plugin (see openDir).
func (s *FileStore) openPluginDir(plugin string, create bool) (int, error) {
	root, err := s.openRoot(create)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	plugins, err := openDir(root, pluginsDir, s.path(), create)
	if err != nil {
		return -1, err
	}
	defer unix.Close(plugins)
	return openDir(plugins, plugin, s.path(plugin), create)
}

// openError explains why opening name in parent failed.
func openError(parent int, name, path string, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return errMissing
	}
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%s is a symbolic link: the credential store never follows links; remove it and set the credential again", path)
		case unix.S_IFDIR, unix.S_IFREG:
		default:
			return fmt.Errorf("%s is not a regular file or directory; remove it", path)
		}
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// fixMode gives the open file fd exactly mode, if it has another.
func fixMode(fd int, path string, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if uint32(st.Mode)&0o7777 == mode {
		return nil
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s to %04o: %w", path, mode, err)
	}
	return nil
}

// Get returns the value of plugin's key, refusing a file that anyone but
// the current user could have written or read (see FileStore).
func (s *FileStore) Get(plugin, key string) ([]byte, error) {
	if err := checkNames(plugin, key); err != nil {
		return nil, err
	}
	dir, err := s.openPluginDir(plugin, false)
	if errors.Is(err, errMissing) {
		return nil, notFound(plugin, key)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	path := s.path(plugin, key)
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is
	// refused below like every other file that is not regular.
	fd, err := unix.Openat(dir, key, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err := openError(dir, key, path, err); !errors.Is(err, errMissing) {
			return nil, err
		}
		return nil, notFound(plugin, key)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkFile(&st, path); err != nil {
		return nil, err
	}
	value, err := io.ReadAll(io.LimitReader(f, MaxValueSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(value) > MaxValueSize {
		clear(value)
		return nil, fmt.Errorf("%s is larger than the limit of %d bytes", path, MaxValueSize)
	}
	return value, nil
}

// checkFile refuses a credential file that is not a small regular file
// private to the current user.
func checkFile(st *unix.Stat_t, path string) error {
	mode := uint32(st.Mode)
	switch {
	case mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file; remove it and set the credential again", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not by the current user (uid %d); remove it and set the credential again", path, st.Uid, os.Geteuid())
	case mode&0o077 != 0:
		return fmt.Errorf("%s has mode %04o: a credential must not be readable or writable by group or others; fix it with: chmod 600 %s", path, mode&0o7777, path)
	case st.Size > MaxValueSize:
		return fmt.Errorf("%s is %d bytes, larger than the limit of %d bytes", path, st.Size, MaxValueSize)
	}
	return nil
}

// Set stores value as plugin's key: a new 0600 file renamed over the old
// one, with the file and the directory synced.
func (s *FileStore) Set(plugin, key string, value []byte) error {
	if err := checkNames(plugin, key); err != nil {
		return err
	}
	if err := checkValue(value); err != nil {
		return err
	}
	dir, err := s.openPluginDir(plugin, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tempPrefix + hex.EncodeToString(rnd[:])
	path := s.path(plugin, key)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), s.path(plugin, tmp))
	committed := false
	defer func() {
		if !committed {
			f.Close()
			unix.Unlinkat(dir, tmp, 0)
		}
	}()
	// The umask may have taken bits away; make the mode exact.
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("chmod the temporary file for %s: %w", path, err)
	}
	if _, err := f.Write(value); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := unix.Renameat(dir, tmp, dir, key); err != nil {
		return fmt.Errorf("rename the temporary file to %s: %w", path, err)
	}
	committed = true
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("sync %s: %w", s.path(plugin), err)
	}
	return nil
}

// Delete removes plugin's key. The plugin's directory stays, so that a
// concurrent Set never writes into a directory being removed.
func (s *FileStore) Delete(plugin, key string) error {
	if err := checkNames(plugin, key); err != nil {
		return err
	}
	dir, err := s.openPluginDir(plugin, false)
	if errors.Is(err, errMissing) {
		return notFound(plugin, key)
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	path := s.path(plugin, key)
	if err := unix.Unlinkat(dir, key, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return notFound(plugin, key)
		}
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("sync %s: %w", s.path(plugin), err)
	}
	return nil
}

// List returns the keys set for plugin, sorted: the regular files of its
// directory whose names are valid keys.
func (s *FileStore) List(plugin string) ([]string, error) {
	if err := CheckPlugin(plugin); err != nil {
		return nil, err
	}
	dir, err := s.openPluginDir(plugin, false)
	if errors.Is(err, errMissing) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return readDir(dir, s.path(plugin), func(e os.DirEntry) bool {
		return e.Type().IsRegular() && CheckKey(e.Name()) == nil
	})
}

// Plugins returns the plugins with at least one key, sorted.
func (s *FileStore) Plugins() ([]string, error) {
	root, err := s.openRoot(false)
	if errors.Is(err, errMissing) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	dir, err := openDir(root, pluginsDir, s.path(), false)
	if errors.Is(err, errMissing) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names, err := readDir(dir, s.path(), func(e os.DirEntry) bool {
		return e.IsDir() && CheckPlugin(e.Name()) == nil
	})
	if err != nil {
		return nil, err
	}
	var plugins []string
	for _, name := range names {
		keys, err := s.List(name)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			plugins = append(plugins, name)
		}
	}
	return plugins, nil
}

// readDir returns the sorted names of the entries of the open directory
// fd that keep accepts, and closes fd.
func readDir(fd int, path string, keep func(os.DirEntry) bool) ([]string, error) {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var names []string
	for _, e := range entries {
		if keep(e) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
