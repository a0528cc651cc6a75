package keychain_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/carapace-dev/carapace/keychain"
)

// newStore returns a file store in a fresh directory, and that directory.
func newStore(t *testing.T) (*keychain.FileStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "credentials")
	return keychain.NewFileStore(dir), dir
}

// set stores a value or fails the test.
func set(t *testing.T, s keychain.Store, plugin, key, value string) {
	t.Helper()
	if err := s.Set(plugin, key, []byte(value)); err != nil {
		t.Fatalf("Set(%s, %s): %v", plugin, key, err)
	}
}

// mode returns the permission bits of path (not following a link).
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestCheckKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"token", true},
		{"api_key", true},
		{"API-Key.v2", true},
		{".env", true},
		{"a.b.c", true},
		{"x", true},
		{strings.Repeat("k", 128), true},
		{"", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"a..b", false},
		{"x..", false},
		{"a/b", false},
		{"/etc/passwd", false},
		{`a\b`, false},
		{"x\x00", false},
		{"x\n", false},
		{"with space", false},
		{"tmp~1234", false},
		{"clé", false},
		{"ключ", false},
		{strings.Repeat("k", 129), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.key), func(t *testing.T) {
			err := keychain.CheckKey(tt.key)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, keychain.ErrBadKey) {
					t.Errorf("error %v does not wrap ErrBadKey", err)
				}
				if !strings.Contains(err.Error(), "A-Z, a-z, 0-9") {
					t.Errorf("error %q does not say what is allowed", err)
				}
			}
		})
	}
}

func TestCheckPlugin(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"github", true},
		{"google-calendar", true},
		{"a", true},
		{"web2-fetch", true},
		{strings.Repeat("p", 64), true},
		{strings.Repeat("p", 65), false},
		{"", false},
		{"..", false},
		{"../x", false},
		{"a/b", false},
		{"x\x00", false},
		{"GitHub", false},
		{"2fa", false},
		{"-x", false},
		{"x-", false},
		{"a--b", false},
		{"snake_case", false},
		{"dot.name", false},
		{"github\n", false},
		{"café", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			err := keychain.CheckPlugin(tt.name)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckPlugin(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if err != nil && (!errors.Is(err, keychain.ErrBadPlugin) || !strings.Contains(err.Error(), "kebab-case")) {
				t.Errorf("error %q: want ErrBadPlugin saying what is allowed", err)
			}
		})
	}
}

// TestBadNamesNeverTouchTheDisk calls every method with path tricks on a
// store whose directory does not exist: each must fail on the name, and
// nothing may be created.
func TestBadNamesNeverTouchTheDisk(t *testing.T) {
	s, dir := newStore(t)
	// A file next to the store that a climbing path could reach.
	outside := filepath.Join(filepath.Dir(dir), "x")
	tests := []struct {
		name        string
		plugin, key string
		want        error
	}{
		{"climbing plugin", "../x", "token", keychain.ErrBadPlugin},
		{"absolute plugin", "/tmp", "token", keychain.ErrBadPlugin},
		{"empty plugin", "", "token", keychain.ErrBadPlugin},
		{"climbing key", "github", "../../../x", keychain.ErrBadKey},
		{"slash key", "github", "a/b", keychain.ErrBadKey},
		{"dot-dot key", "github", "..", keychain.ErrBadKey},
		{"NUL key", "github", "x\x00", keychain.ErrBadKey},
		{"empty key", "github", "", keychain.ErrBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Set(tt.plugin, tt.key, []byte("v")); !errors.Is(err, tt.want) {
				t.Errorf("Set: %v, want %v", err, tt.want)
			}
			if _, err := s.Get(tt.plugin, tt.key); !errors.Is(err, tt.want) {
				t.Errorf("Get: %v, want %v", err, tt.want)
			}
			if err := s.Delete(tt.plugin, tt.key); !errors.Is(err, tt.want) {
				t.Errorf("Delete: %v, want %v", err, tt.want)
			}
			if tt.want == keychain.ErrBadPlugin {
				if _, err := s.List(tt.plugin); !errors.Is(err, tt.want) {
					t.Errorf("List: %v, want %v", err, tt.want)
				}
			}
		})
	}
	for _, p := range []string{dir, outside} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after calls with bad names (%v)", p, err)
		}
	}
}

func TestRoundTripAndModes(t *testing.T) {
	// A umask that would leave group and other bits must not matter.
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)

	s, dir := newStore(t)
	if _, err := s.Get("github", "token"); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("Get on an empty store: %v, want ErrNotFound", err)
	}
	secret := "ghp_" + strings.Repeat("s3cr3t", 6)
	set(t, s, "github", "token", secret)
	got, err := s.Get("github", "token")
	if err != nil || string(got) != secret {
		t.Fatalf("Get = %q, %v", got, err)
	}
	binary := []byte{0, 1, 2, 0xff, '\n'}
	if err := s.Set("github", "binary", binary); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get("github", "binary"); err != nil || !bytes.Equal(got, binary) {
		t.Errorf("binary value: %q, %v", got, err)
	}

	for path, want := range map[string]os.FileMode{
		dir:                                     0o700,
		filepath.Join(dir, "plugins"):           0o700,
		filepath.Join(dir, "plugins", "github"): 0o700,
		filepath.Join(dir, "plugins/github/token"): 0o600,
	} {
		if m := mode(t, path); m != want {
			t.Errorf("%s: mode %04o, want %04o", path, m, want)
		}
	}

	// Loose directory modes are fixed on the next Set.
	for _, p := range []string{dir, filepath.Join(dir, "plugins", "github")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	set(t, s, "github", "token", secret)
	for _, p := range []string{dir, filepath.Join(dir, "plugins", "github")} {
		if m := mode(t, p); m != 0o700 {
			t.Errorf("%s: mode %04o after Set, want 0700", p, m)
		}
	}
}

func TestSetRefusesBadValues(t *testing.T) {
	s, dir := newStore(t)
	for name, v := range map[string][]byte{
		"empty":   nil,
		"too big": bytes.Repeat([]byte("x"), keychain.MaxValueSize+1),
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Set("github", "token", v); err == nil {
				t.Error("Set succeeded")
			}
		})
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused values created %s", dir)
	}
	if err := s.Set("github", "token", bytes.Repeat([]byte("x"), keychain.MaxValueSize)); err != nil {
		t.Errorf("a value of exactly MaxValueSize: %v", err)
	}
}

func TestAtomicOverwrite(t *testing.T) {
	s, dir := newStore(t)
	path := filepath.Join(dir, "plugins", "github", "token")
	set(t, s, "github", "token", "old value")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	set(t, s, "github", "token", "new")
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("overwrite reused the file: want a new file renamed over the old one")
	}
	if got, err := s.Get("github", "token"); err != nil || string(got) != "new" {
		t.Errorf("Get = %q, %v; want new", got, err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("plugin directory holds %d entries, want only the credential (temporary files left?)", len(entries))
	}

	// A temporary file left by a crash is not a credential.
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "tmp~deadbeef"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := s.List("github"); err != nil || !slices.Equal(keys, []string{"token"}) {
		t.Errorf("List = %q, %v; want [token]", keys, err)
	}
}

func TestGetRefuses(t *testing.T) {
	const secret = "the-secret-value"
	tests := []struct {
		name string
		// prepare damages the store after github/token and other/token
		// were set, and returns the plugin and key to read.
		prepare func(t *testing.T, dir string) (plugin, key string)
		want    []string // in the error; <dir> stands for the store's directory
	}{
		{
			name: "group-readable file",
			prepare: func(t *testing.T, dir string) (string, string) {
				chmod(t, filepath.Join(dir, "plugins/github/token"), 0o640)
				return "github", "token"
			},
			want: []string{"mode 0640", "chmod 600 <dir>/plugins/github/token"},
		},
		{
			name: "world-writable file",
			prepare: func(t *testing.T, dir string) (string, string) {
				chmod(t, filepath.Join(dir, "plugins/github/token"), 0o602)
				return "github", "token"
			},
			want: []string{"mode 0602", "chmod 600"},
		},
		{
			name: "symlinked file",
			prepare: func(t *testing.T, dir string) (string, string) {
				link := filepath.Join(dir, "plugins/github/stolen")
				symlink(t, filepath.Join(dir, "plugins/other/token"), link)
				return "github", "stolen"
			},
			want: []string{"symbolic link"},
		},
		{
			name: "symlinked plugin directory",
			prepare: func(t *testing.T, dir string) (string, string) {
				// evil's directory points at other's: reading evil/token
				// must not return other's secret.
				symlink(t, filepath.Join(dir, "plugins/other"), filepath.Join(dir, "plugins/evil"))
				return "evil", "token"
			},
			want: []string{"symbolic link", filepath.Join("plugins", "evil")},
		},
		{
			name: "relative symlinked plugin directory",
			prepare: func(t *testing.T, dir string) (string, string) {
				symlink(t, "other", filepath.Join(dir, "plugins/evil"))
				return "evil", "token"
			},
			want: []string{"symbolic link"},
		},
		{
			name: "symlinked plugins directory",
			prepare: func(t *testing.T, dir string) (string, string) {
				moved := filepath.Join(filepath.Dir(dir), "moved")
				if err := os.Rename(filepath.Join(dir, "plugins"), moved); err != nil {
					t.Fatal(err)
				}
				symlink(t, moved, filepath.Join(dir, "plugins"))
				return "github", "token"
			},
			want: []string{"symbolic link"},
		},
		{
			name: "directory",
			prepare: func(t *testing.T, dir string) (string, string) {
				if err := os.Mkdir(filepath.Join(dir, "plugins/github/sub"), 0o700); err != nil {
					t.Fatal(err)
				}
				return "github", "sub"
			},
			want: []string{"not a regular file"},
		},
		{
			name: "fifo",
			prepare: func(t *testing.T, dir string) (string, string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "plugins/github/fifo"), 0o600); err != nil {
					t.Fatal(err)
				}
				return "github", "fifo"
			},
			want: []string{"not a regular file"},
		},
		{
			name: "oversized file",
			prepare: func(t *testing.T, dir string) (string, string) {
				p := filepath.Join(dir, "plugins/github/big")
				if err := os.WriteFile(p, bytes.Repeat([]byte("x"), keychain.MaxValueSize+1), 0o600); err != nil {
					t.Fatal(err)
				}
				return "github", "big"
			},
			want: []string{"larger than the limit of 65536 bytes"},
		},
	}
	if os.Geteuid() == 0 {
		// Only root can give a file away; as another user this case
		// cannot be set up, and is not faked.
		tests = append(tests, struct {
			name    string
			prepare func(t *testing.T, dir string) (plugin, key string)
			want    []string
		}{
			name: "file of another user",
			prepare: func(t *testing.T, dir string) (string, string) {
				if err := os.Chown(filepath.Join(dir, "plugins/github/token"), 4242, 4242); err != nil {
					t.Fatal(err)
				}
				return "github", "token"
			},
			want: []string{"owned by uid 4242", "not by the current user"},
		})
	} else {
		t.Logf("not root (uid %d): the file-of-another-user case needs chown and is not run", os.Geteuid())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := newStore(t)
			set(t, s, "github", "token", secret)
			set(t, s, "other", "token", secret)
			plugin, key := tt.prepare(t, dir)
			got, err := s.Get(plugin, key)
			if err == nil {
				t.Fatalf("Get(%s, %s) = %q, want an error", plugin, key, got)
			}
			if got != nil {
				t.Errorf("Get returned a value with its error")
			}
			if errors.Is(err, keychain.ErrNotFound) {
				t.Errorf("Get: %v; want a refusal, not ErrNotFound", err)
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "<dir>", dir); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func chmod(t *testing.T, path string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestSymlinkedPluginDirectoryIsNeverUsed points one plugin's directory at
// another's: no method may read, write, list or delete through it.
func TestSymlinkedPluginDirectoryIsNeverUsed(t *testing.T) {
	s, dir := newStore(t)
	set(t, s, "victim", "token", "victim-secret")
	symlink(t, filepath.Join(dir, "plugins", "victim"), filepath.Join(dir, "plugins", "evil"))

	if _, err := s.Get("evil", "token"); err == nil {
		t.Error("Get through the link succeeded")
	}
	if err := s.Set("evil", "token", []byte("overwritten")); err == nil {
		t.Error("Set through the link succeeded")
	}
	if err := s.Delete("evil", "token"); err == nil || errors.Is(err, keychain.ErrNotFound) {
		t.Errorf("Delete through the link: %v, want a refusal", err)
	}
	if keys, err := s.List("evil"); err == nil {
		t.Errorf("List through the link = %q, want an error", keys)
	}
	if plugins, err := s.Plugins(); err != nil || !slices.Equal(plugins, []string{"victim"}) {
		t.Errorf("Plugins = %q, %v; want [victim] (a link is not a plugin directory)", plugins, err)
	}
	if got, err := s.Get("victim", "token"); err != nil || string(got) != "victim-secret" {
		t.Errorf("victim's credential after the attempts: %q, %v", got, err)
	}
}

func TestDeleteListPlugins(t *testing.T) {
	s, dir := newStore(t)
	if plugins, err := s.Plugins(); err != nil || len(plugins) != 0 {
		t.Errorf("Plugins of a store that does not exist yet = %q, %v", plugins, err)
	}
	if keys, err := s.List("github"); err != nil || len(keys) != 0 {
		t.Errorf("List of an unknown plugin = %q, %v", keys, err)
	}
	if err := s.Delete("github", "token"); !errors.Is(err, keychain.ErrNotFound) {
		t.Errorf("Delete on an empty store: %v, want ErrNotFound", err)
	}

	set(t, s, "telegram", "bot_token", "t")
	set(t, s, "github", "token", "g1")
	set(t, s, "github", "app.key", "g2")
	set(t, s, "github", "Z-last", "g3")
	// Things in the tree that are not credentials.
	if err := os.Mkdir(filepath.Join(dir, "plugins", "github", "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins", "Not_A_Plugin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", "Not_A_Plugin", "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", "stray-file"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	if keys, err := s.List("github"); err != nil || !slices.Equal(keys, []string{"Z-last", "app.key", "token"}) {
		t.Errorf("List(github) = %q, %v", keys, err)
	}
	if plugins, err := s.Plugins(); err != nil || !slices.Equal(plugins, []string{"github", "telegram"}) {
		t.Errorf("Plugins = %q, %v", plugins, err)
	}

	if err := s.Delete("telegram", "bot_token"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("telegram", "bot_token"); !errors.Is(err, keychain.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Get("telegram", "bot_token"); !errors.Is(err, keychain.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete("github", "subdir"); err == nil || errors.Is(err, keychain.ErrNotFound) {
		t.Errorf("Delete of a directory: %v, want a refusal", err)
	}
	if plugins, err := s.Plugins(); err != nil || !slices.Equal(plugins, []string{"github"}) {
		t.Errorf("Plugins after deleting telegram's only key = %q, %v; want [github]", plugins, err)
	}
	if keys, err := s.List("telegram"); err != nil || len(keys) != 0 {
		t.Errorf("List(telegram) after Delete = %q, %v", keys, err)
	}
}

// TestConcurrentSetGet races writers and readers on the same keys: every
// read must see one whole value that was written, never a torn or empty
// one, and the race detector must stay quiet.
func TestConcurrentSetGet(t *testing.T) {
	s, _ := newStore(t)
	values := make([][]byte, 8)
	for i := range values {
		values[i] = bytes.Repeat([]byte{'a' + byte(i)}, 100+i*1000)
	}
	keys := []string{"one", "two"}
	for _, k := range keys {
		if err := s.Set("race", k, values[0]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if err := s.Set("race", keys[i%2], values[(w+i)%len(values)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for i := range 100 {
				got, err := s.Get("race", keys[i%2])
				if err != nil {
					errs <- err
					return
				}
				if !slices.ContainsFunc(values, func(v []byte) bool { return bytes.Equal(v, got) }) {
					errs <- fmt.Errorf("read a torn value of %d bytes", len(got))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if _, err := s.List("race"); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if keys, err := s.List("race"); err != nil || !slices.Equal(keys, []string{"one", "two"}) {
		t.Errorf("List after the race = %q, %v (temporary files left?)", keys, err)
	}
}
