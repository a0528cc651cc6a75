package cli_test

import (
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/mail"
)

// setup --mail-address adds one account for group main, its servers from
// the provider or the flags, its app password from stdin; bad input is
// refused naming the flag, and nothing is written; a second run changes
// nothing.
func TestSetupMail(t *testing.T) {
	h := emptyHome(t)
	run := func(stdin string, args ...string) result {
		return carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}, Stdin: strings.NewReader(stdin), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run},
			h, append([]string{"setup", "--yes"}, args...)...)
	}
	accounts := func() []any {
		cfg, err := config.Load(h.Config())
		if err != nil {
			t.Fatal(err)
		}
		l, _ := cfg.Plugins["mail"].Config["accounts"].([]any)
		return l
	}

	// Without --mail-address: skipped, nothing written (the control of
	// "nothing written" below).
	r := run("")
	if !strings.Contains(stepLine(r.stdout, "skip", "mail"), "not set up") || len(accounts()) != 0 {
		t.Fatalf("setup without mail flags: %+v", r)
	}
	// Refused, nothing written: servers unknown; a flag without the
	// address; an address that is not one.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mail-address", "me@example.org", "--mail-password-stdin"}, "--mail-imap HOST:PORT --mail-smtp HOST:PORT"},
		{[]string{"--mail-imap", "imap.example.org:993"}, "go with --mail-address"},
		{[]string{"--mail-address", "not an address", "--mail-imap", "imap.example.org:993", "--mail-smtp", "smtp.example.org:465", "--mail-password-stdin"}, "from"},
	} {
		r := run("pw-refused", tc.args...)
		if r.code != 1 || !strings.Contains(r.stdout, tc.want) || len(accounts()) != 0 {
			t.Errorf("setup %v: exit %d, want 1 naming %q and nothing written:\n%s", tc.args, r.code, tc.want, r.stdout)
		}
		if _, err := keychain.Default(h.CredentialsDir()).Get("mail", "personal"); err == nil {
			t.Fatalf("setup %v stored a password", tc.args)
		}
	}

	// A Gmail address: its servers, save_sent off, the password stored.
	r = run("gmail-app-pass\n", "--mail-address", "me@gmail.com", "--mail-password-stdin")
	if !strings.Contains(r.stdout, "app password of account personal stored (14 bytes)") || strings.Contains(r.stdout+r.stderr, "gmail-app-pass") {
		t.Fatalf("setup --mail-address me@gmail.com: %+v", r)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	pc := cfg.Plugins["mail"].Config
	if names, err := mail.AccountNames(pc); err != nil || strings.Join(names, ",") != "personal" {
		t.Fatalf("the plugin reads accounts %v, %v from %v", names, err, pc)
	}
	acct := accounts()[0].(map[string]any)
	for k, want := range map[string]any{"imap": "imap.gmail.com:993", "imap_security": "tls", "smtp": "smtp.gmail.com:465", "smtp_security": "tls",
		"username": "me@gmail.com", "from": "me@gmail.com", "save_sent": false} {
		if acct[k] != want {
			t.Errorf("account %s = %v, want %v", k, acct[k], want)
		}
	}
	if g := pc["groups"].(map[string]any)["main"].(map[string]any)["accounts"]; len(g.([]any)) != 1 || g.([]any)[0] != "personal" {
		t.Errorf("group main's accounts: %v", g)
	}
	if b, err := keychain.Default(h.CredentialsDir()).Get("mail", "personal"); err != nil || string(b) != "gmail-app-pass" {
		t.Fatalf("the stored password: %q, %v", b, err)
	}
	// Again: kept as it is; another address is not added over it.
	before := accounts()
	if r := run(""); !strings.Contains(stepLine(r.stdout, "ok", "mail"), "account(s) personal") {
		t.Fatalf("setup again: %+v", r)
	}
	if r := run("x\n", "--mail-address", "other@fastmail.com", "--mail-password-stdin"); !strings.Contains(stepLine(r.stdout, "warn", "mail"), "already has mail account(s) personal") {
		t.Fatalf("setup with another address: %+v", r)
	}
	if after := accounts(); len(after) != 1 || after[0].(map[string]any)["username"] != before[0].(map[string]any)["username"] {
		t.Fatalf("accounts changed: %v", after)
	}
}

// Servers given by flag: the security follows the port.
func TestSetupMailOwnServers(t *testing.T) {
	h := emptyHome(t)
	r := carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: &testutil.Buffer{}, Stdin: strings.NewReader("pw\n"), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, h,
		"setup", "--yes", "--mail-address", "me@example.org", "--mail-account", "work", "--mail-imap", "mail.example.org:143", "--mail-smtp", "mail.example.org:465", "--mail-password-stdin")
	if !strings.Contains(r.stdout, "app password of account work stored (2 bytes)") {
		t.Fatalf("setup: %+v", r)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	acct := cfg.Plugins["mail"].Config["accounts"].([]any)[0].(map[string]any)
	if acct["name"] != "work" || acct["imap_security"] != "starttls" || acct["smtp_security"] != "tls" || acct["save_sent"] != nil {
		t.Fatalf("account %v", acct)
	}
}
