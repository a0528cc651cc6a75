//go:build linux

// The auth commands are tested on Linux, where they use the file store in
// the test's home and a pseudo-terminal stands in for the user's. On macOS
// (with cgo) the commands use the login Keychain, which these tests must
// not fill; keychain/keychain_darwin_test.go exercises that store there.

package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/keychain"
)

// secret is the value the tests store; no command may ever print it, or
// any long piece of it.
const secret = "ghp_Sup3rS3cretT0kenValue0123456789"

// authRun runs the command line with stdin and checks that neither stdout
// nor stderr contains the secret or a long piece of it.
func authRun(t *testing.T, h home.Dir, stdin string, args ...string) result {
	t.Helper()
	r := carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}, Stdin: strings.NewReader(stdin)}, h, args...)
	noSecret(t, r.stdout+r.stderr, secret)
	return r
}

// noSecret fails if out contains any 8-byte piece of s.
func noSecret(t *testing.T, out, s string) {
	t.Helper()
	for i := 0; i+8 <= len(s); i++ {
		if strings.Contains(out, s[i:i+8]) {
			t.Fatalf("output contains a piece of the secret (%q):\n%s", s[i:i+8], out)
		}
	}
}

// credFile is where the file store keeps a credential.
func credFile(h home.Dir, plugin, key string) string {
	return filepath.Join(h.CredentialsDir(), "plugins", plugin, key)
}

func TestAuthRoundTrip(t *testing.T) {
	h := controltest.TempHome(t)
	authRun(t, h, "", "auth", "status").want(t, 0, []string{"no credentials stored", "files under " + h.CredentialsDir(),
		`printf %s "$TOKEN" | carapace auth set --plugin NAME --key KEY`}, nil)

	authRun(t, h, secret+"\n", "auth", "set", "--plugin", "github", "--key", "token").
		want(t, 0, []string{"stored token for plugin github (35 bytes)\n"}, nil)
	authRun(t, h, "123456:bot-token-value\r\n", "auth", "set", "--plugin", "telegram", "--key", "bot_token").
		want(t, 0, []string{"stored bot_token for plugin telegram (22 bytes)"}, nil)

	path := credFile(h, "github", "token")
	b, err := os.ReadFile(path)
	if err != nil || string(b) != secret {
		t.Fatalf("on disk: %q, %v; want the secret without its newline", b, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("%s: mode %04o, want 0600", path, m)
	}

	r := authRun(t, h, "", "auth", "status")
	r.want(t, 0, []string{"PLUGIN", "KEY", "VALUE", "github", "token", "•••••• (35 bytes)", "telegram", "bot_token", "•••••• (22 bytes)"}, nil)
	noSecret(t, r.stdout, "123456:bot-token-value")
	if strings.Index(r.stdout, "github") > strings.Index(r.stdout, "telegram") {
		t.Errorf("plugins not sorted:\n%s", r.stdout)
	}
	r = authRun(t, h, "", "auth", "status", "--plugin", "telegram")
	r.want(t, 0, []string{"telegram", "bot_token"}, nil)
	if strings.Contains(r.stdout, "github") {
		t.Errorf("status --plugin telegram lists github:\n%s", r.stdout)
	}

	r = authRun(t, h, "", "auth", "status", "--json")
	var st struct {
		Store       string
		Credentials []struct {
			Plugin, Key string
			Bytes       int
			Error       string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if len(st.Credentials) != 2 || st.Credentials[0].Plugin != "github" || st.Credentials[0].Bytes != 35 || st.Credentials[1].Key != "bot_token" {
		t.Errorf("status --json: %+v", st)
	}

	authRun(t, h, "", "auth", "delete", "--plugin", "github", "--key", "token").want(t, 0, []string{"deleted token for plugin github"}, nil)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still exists after delete (%v)", path, err)
	}
	authRun(t, h, "", "auth", "delete", "--plugin", "github", "--key", "token").
		want(t, 1, nil, []string{"carapace: no credential token stored for plugin github (see carapace auth status --plugin github)"})
	authRun(t, h, "", "auth", "status", "--plugin", "github").want(t, 0, []string{"no credentials stored for plugin github",
		`printf %s "$TOKEN" | carapace auth set --plugin github --key KEY`}, nil)
	authRun(t, h, "", "auth", "status", "--json", "--plugin", "github").want(t, 0, []string{`"credentials": []`}, nil)
}

// TestAuthSetInput checks what `auth set` makes of its stdin.
func TestAuthSetInput(t *testing.T) {
	const max = 64 << 10
	tests := []struct {
		name   string
		stdin  string
		code   int
		stored string // when code is 0
		stderr string // when code is not 0
	}{
		{name: "printf", stdin: "abc", stored: "abc"},
		{name: "echo", stdin: "abc\n", stored: "abc"},
		{name: "crlf", stdin: "abc\r\n", stored: "abc"},
		{name: "only one newline is stripped", stdin: "abc\n\n", stored: "abc\n"},
		{name: "spaces are kept", stdin: " a b \t", stored: " a b \t"},
		{name: "inner newlines are kept", stdin: "line1\nline2\n", stored: "line1\nline2"},
		{name: "binary", stdin: "\x00\xff\x01", stored: "\x00\xff\x01"},
		{name: "exactly 64 KiB", stdin: strings.Repeat("k", max), stored: strings.Repeat("k", max)},
		{name: "64 KiB and a newline", stdin: strings.Repeat("k", max) + "\r\n", stored: strings.Repeat("k", max)},
		{name: "one byte too many", stdin: strings.Repeat("k", max+1), code: 1, stderr: "larger than the limit of 65536 bytes"},
		{name: "far too large", stdin: strings.Repeat("k", 1<<20), code: 1, stderr: "larger than the limit"},
		{
			// A cut at the limit must not look like a secret ending in a
			// newline.
			name: "newline just past the limit", stdin: strings.Repeat("k", max) + "\r\n" + strings.Repeat("k", 100),
			code: 1, stderr: "larger than the limit",
		},
		{name: "empty", stdin: "", code: 1, stderr: "empty secret"},
		{name: "only a newline", stdin: "\n", code: 1, stderr: "empty secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			r := authRun(t, h, tt.stdin, "auth", "set", "--plugin", "github", "--key", "token")
			if tt.code != 0 {
				r.want(t, tt.code, nil, []string{tt.stderr})
				if _, err := os.Stat(credFile(h, "github", "token")); !os.IsNotExist(err) {
					t.Errorf("a refused secret was stored (%v)", err)
				}
				return
			}
			r.want(t, 0, []string{"stored token for plugin github"}, nil)
			b, err := os.ReadFile(credFile(h, "github", "token"))
			if err != nil || string(b) != tt.stored {
				t.Errorf("stored %q, %v; want %q", textutil.Clip(string(b), 40), err, textutil.Clip(tt.stored, 40))
			}
		})
	}
}

// TestAuthSetRefusesArgv checks that a secret on the command line is
// refused, not stored, and not repeated in the error.
func TestAuthSetRefusesArgv(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"positional", []string{"--plugin", "github", "--key", "token", secret}, `pipe it on stdin, e.g. printf %s "$TOKEN" | carapace auth set --plugin github --key token`},
		{"positional first", []string{secret, "--plugin", "github", "--key", "token"}, "pipe it on stdin"},
		{"looks like short flags", []string{"--plugin", "github", "--key", "token", "-" + secret}, "secrets are read from stdin"},
		{"value flag", []string{"--plugin", "github", "--key", "token", "--value=" + secret}, "unknown flag: --value"},
		{"value flag and argument", []string{"--plugin", "github", "--key", "token", "--value", secret}, "unknown flag: --value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			r := authRun(t, h, "from-stdin", append([]string{"auth", "set"}, tt.args...)...)
			r.want(t, 2, nil, []string{tt.want, "(see 'carapace auth set --help')"})
			if _, err := os.Stat(h.CredentialsDir()); !os.IsNotExist(err) {
				t.Errorf("credentials directory created by a refused command (%v)", err)
			}
		})
	}
}

func TestAuthBadNames(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"set", "--plugin", "../x", "--key", "token"}, "--plugin: plugin \"../x\": plugin names are kebab-case"},
		{[]string{"set", "--plugin", "GitHub", "--key", "token"}, "kebab-case"},
		{[]string{"set", "--plugin", "github", "--key", "../../config.toml"}, "--key: key \"../../config.toml\": keys are 1-128 characters of A-Z, a-z, 0-9"},
		{[]string{"set", "--plugin", "github", "--key", "a/b"}, "keys are 1-128 characters"},
		{[]string{"set", "--plugin", "github", "--key", ".."}, "keys are 1-128 characters"},
		{[]string{"set", "--plugin", "github", "--key", "x\x00"}, `key "x\x00"`},
		{[]string{"set", "--plugin", "github", "--key", strings.Repeat("k", 129)}, "keys are 1-128 characters"},
		{[]string{"set", "--key", "token"}, "--plugin is required"},
		{[]string{"set", "--plugin", "github"}, "--key is required"},
		{[]string{"delete", "--plugin", "a/b", "--key", "token"}, "kebab-case"},
		{[]string{"delete", "--plugin", "github", "--key", "../x"}, "keys are 1-128 characters"},
		{[]string{"delete", "--plugin", "github"}, "--key is required"},
		{[]string{"status", "--plugin", "../x"}, "kebab-case"},
		{[]string{"status", "extra"}, `unknown command "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := controltest.TempHome(t)
			r := authRun(t, h, secret, append([]string{"auth"}, tt.args...)...)
			r.want(t, 2, nil, []string{tt.want})
			if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("want one line on stderr and nothing on stdout:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			if _, err := os.Stat(h.CredentialsDir()); !os.IsNotExist(err) {
				t.Errorf("credentials directory created by a refused command (%v)", err)
			}
		})
	}
}

// TestAuthStatusUnreadable checks that a credential the store refuses is
// listed with the fix, without its value, and makes status exit 1.
func TestAuthStatusUnreadable(t *testing.T) {
	h := controltest.TempHome(t)
	authRun(t, h, secret, "auth", "set", "--plugin", "github", "--key", "token").want(t, 0, nil, nil)
	authRun(t, h, "other-value", "auth", "set", "--plugin", "github", "--key", "other").want(t, 0, nil, nil)
	path := credFile(h, "github", "token")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	authRun(t, h, "", "auth", "status").want(t, 1, []string{"token", "unreadable:", "mode 0644", "chmod 600 " + path, "other", "(11 bytes)"},
		[]string{"carapace: 1 credential(s) could not be read"})
	authRun(t, h, "", "auth", "status", "--json").want(t, 1, []string{`"error": "` + path + ` has mode 0644`}, nil)
}

// TestAuthSetTerminal types the secret into a pseudo-terminal: auth set
// must prompt on stderr, turn echo off while reading (nothing comes back
// on the terminal) and restore it afterwards.
func TestAuthSetTerminal(t *testing.T) {
	ptmx, tty := openPTY(t)
	h := controltest.TempHome(t)
	stderr := &testutil.Buffer{}
	done := make(chan result, 1)
	go func() {
		done <- carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: stderr, Stdin: tty}, h,
			"auth", "set", "--plugin", "github", "--key", "token")
	}()
	// Type only once echo is off, as a user would after the prompt.
	waitFor(t, "echo off", func() bool { return !echoOn(t, tty) })
	if !strings.Contains(stderr.String(), "Secret for github token (input is hidden): ") {
		t.Errorf("no prompt on stderr: %q", stderr.String())
	}
	if _, err := ptmx.Write([]byte(secret + "\n")); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("auth set did not return")
	}
	r.want(t, 0, []string{"stored token for plugin github (35 bytes)"}, nil)
	noSecret(t, r.stdout+stderr.String(), secret)
	if b, err := os.ReadFile(credFile(h, "github", "token")); err != nil || string(b) != secret {
		t.Errorf("stored %q, %v", b, err)
	}
	if !echoOn(t, tty) {
		t.Error("echo not restored")
	}
	// Whatever the terminal shows: the line discipline's echo would be
	// here.
	if err := ptmx.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	shown := make([]byte, 4096)
	n, _ := ptmx.Read(shown)
	noSecret(t, string(shown[:n]), secret)
}

// openPTY opens a pseudo-terminal pair (Linux): the master, which plays
// the user, and the terminal the command reads.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	raw, err := ptmx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioErr error
	raw.Control(func(fd uintptr) {
		if ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioErr == nil {
			n, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	})
	if ioErr != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", ioErr)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptmx, tty
}

// echoOn reports whether the terminal echoes input.
func echoOn(t *testing.T, tty *os.File) bool {
	t.Helper()
	raw, err := tty.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var tios *unix.Termios
	raw.Control(func(fd uintptr) { tios, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if err != nil {
		t.Fatalf("read the terminal's settings: %v", err)
	}
	return tios.Lflag&unix.ECHO != 0
}

// The model API's credential: --llm names it, no plugin can.
func TestAuthLLM(t *testing.T) {
	h := controltest.TempHome(t)
	authRun(t, h, "sk-ant-api03-llmkey\n", "auth", "set", "--llm", "anthropic").
		want(t, 0, []string{"stored anthropic-api-key for plugin carapace-llm (19 bytes)"}, nil)
	authRun(t, h, "oauth-token\n", "auth", "set", "--llm", "anthropic", "--oauth").
		want(t, 0, []string{"stored anthropic-oauth-token for plugin carapace-llm"}, nil)
	if b, err := os.ReadFile(credFile(h, keychain.LLMPlugin, keychain.LLMKeyAPI)); err != nil || string(b) != "sk-ant-api03-llmkey" {
		t.Fatalf("stored key: %q, %v", b, err)
	}
	r := authRun(t, h, "", "auth", "status")
	r.want(t, 0, []string{"carapace-llm", "anthropic-api-key", "anthropic-oauth-token"}, nil)
	noSecret(t, r.stdout, "sk-ant-api03-llmkey")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--llm", "openai"}, "the model APIs are anthropic, ollama, llamacpp, custom"},
		{[]string{"--llm", "anthropic", "--plugin", "x", "--key", "y"}, "give --llm, or --plugin and --key, not both"},
		{[]string{"--oauth", "--plugin", "x", "--key", "y"}, "--oauth goes with --llm anthropic"},
	} {
		authRun(t, h, "s\n", append([]string{"auth", "set"}, tc.args...)...).want(t, 2, nil, []string{tc.want})
	}
	authRun(t, h, "", "auth", "delete", "--llm", "anthropic").want(t, 0, []string{"deleted anthropic-api-key for plugin carapace-llm"}, nil)
}
