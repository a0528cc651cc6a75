package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/plugins/mail"
)

// mailSetupFlags are setup's flags for a mail account (docs/MAIL.md).
type mailSetupFlags struct {
	address, account, imap, smtp string
	passwordStdin                bool
}

func (f *mailSetupFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.address, "mail-address", "", "set up a mail account with this address (the servers of Fastmail, iCloud and Gmail are known; else give --mail-imap and --mail-smtp)")
	fl.StringVar(&f.account, "mail-account", "", "the mail account's name, also its password's credential key (default "+defaultMailAccount+")")
	fl.StringVar(&f.imap, "mail-imap", "", "the account's IMAP server as host:port (993: TLS, else STARTTLS)")
	fl.StringVar(&f.smtp, "mail-smtp", "", "the account's SMTP submission server as host:port (465: TLS, else STARTTLS)")
	fl.BoolVar(&f.passwordStdin, "mail-password-stdin", false, "read the mail account's app password from stdin")
}

// defaultMailAccount names the account setup adds, unless --mail-account.
const defaultMailAccount = "personal"

// mailGroup is the group setup grants the account to.
const mailGroup = "main"

// mail adds one mail account, for group main, with its app password: from
// the flags, or asked at the terminal. An account already configured is
// left as it is (more are added in config.toml, docs/MAIL.md).
func (s *setupRun) mail() {
	const step = "mail"
	f := s.f.mail
	if f.address == "" && (f.imap != "" || f.smtp != "" || f.account != "" || f.passwordStdin) {
		s.report(stepFail, step, "--mail-imap, --mail-smtp, --mail-account and --mail-password-stdin go with --mail-address", "carapace setup --mail-address ADDRESS …")
		return
	}
	if pc, ok := s.cfg.Plugins["mail"]; ok {
		if names, err := mail.AccountNames(pc.Config); err == nil && len(names) > 0 {
			if f.address != "" {
				s.report(stepWarn, step, "config.toml already has mail account(s) "+strings.Join(names, ", ")+": setup adds none", "add it in [plugins.mail.config] (docs/MAIL.md), then carapace auth set --plugin mail --key NAME")
				return
			}
			s.report(stepOK, step, "account(s) "+strings.Join(names, ", "), "")
			return
		}
	}
	address := f.address
	if address == "" {
		if s.ask == nil {
			s.report(stepSkip, step, "not set up (docs/MAIL.md; carapace setup --mail-address ADDRESS --mail-password-stdin)", "")
			return
		}
		fmt.Fprintln(s.out, "\nMail lets your agent search, read and draft your mail; it sends only a mail you read in full and approve.")
		yes, err := s.ask.yes("Set up a mail account (IMAP and SMTP, with an app password)?", false)
		if err != nil {
			s.report(stepFail, step, err.Error(), "")
			return
		}
		if !yes {
			s.report(stepSkip, step, "not set up (docs/MAIL.md; carapace setup --mail-address ADDRESS --mail-password-stdin)", "")
			return
		}
		if address, err = s.ask.line("Your mail address: "); err != nil {
			s.report(stepFail, step, err.Error(), "")
			return
		}
	}
	name := f.account
	if name == "" {
		name = defaultMailAccount
	}
	acct := map[string]any{"name": name, "username": address, "from": address}
	imapAddr, smtpAddr := f.imap, f.smtp
	if p, known := mail.ProviderFor(address); known && imapAddr == "" && smtpAddr == "" {
		acct["imap"], acct["imap_security"] = p.IMAP, string(p.IMAPSecurity)
		acct["smtp"], acct["smtp_security"] = p.SMTP, string(p.SMTPSecurity)
		if !p.SaveSent {
			acct["save_sent"] = false
		}
		if s.ask != nil || !f.passwordStdin {
			fmt.Fprintf(s.out, "%s: make an app password for Carapace at %s.\n", p.Name, p.AppPasswords)
		}
	} else {
		var err error
		if imapAddr == "" && s.ask != nil {
			imapAddr, err = s.ask.line("IMAP server (host:port, e.g. imap.example.com:993): ")
		}
		if err == nil && smtpAddr == "" && s.ask != nil {
			smtpAddr, err = s.ask.line("SMTP server (host:port, e.g. smtp.example.com:465): ")
		}
		if err != nil {
			s.report(stepFail, step, err.Error(), "")
			return
		}
		if imapAddr == "" || smtpAddr == "" {
			s.report(stepFail, step, "the servers of "+address+" are not known to setup", "carapace setup --mail-address "+address+" --mail-imap HOST:PORT --mail-smtp HOST:PORT")
			return
		}
		acct["imap"], acct["imap_security"] = imapAddr, string(mail.SecurityFor(imapAddr))
		acct["smtp"], acct["smtp_security"] = smtpAddr, string(mail.SecurityFor(smtpAddr))
	}
	// Checked as the plugin will read it, before anything is written.
	plugCfg := map[string]any{"accounts": []any{acct}, "groups": map[string]any{mailGroup: map[string]any{"accounts": []any{name}}}}
	if _, err := mail.AccountNames(plugCfg); err != nil {
		s.report(stepFail, step, oneLine(err.Error()), "carapace setup --mail-address ADDRESS [--mail-imap HOST:PORT --mail-smtp HOST:PORT]")
		return
	}

	store, err := s.a.credentials()
	if err != nil {
		s.report(stepFail, step, err.Error(), "")
		return
	}
	var pw []byte
	switch {
	case f.passwordStdin:
		pw, err = s.secret("App password for " + address)
	case s.ask != nil:
		pw, err = s.ask.secret("App password for " + address + " (input hidden; Enter to skip): ")
	}
	defer clear(pw)
	if err != nil {
		s.report(stepFail, step, err.Error(), "carapace auth set --plugin mail --key "+name)
		return
	}
	for _, kv := range [][2]string{
		{"plugins.mail.config.accounts", "[" + inlineTable(acct, "name", "imap", "imap_security", "smtp", "smtp_security", "username", "from", "save_sent") + "]"},
		{"plugins.mail.config.groups." + mailGroup + ".accounts", "[" + config.Quote(name) + "]"},
	} {
		if err := s.setTOML(step, kv[0], kv[1]); err != nil {
			s.report(stepFail, step, err.Error(), "carapace config edit")
			return
		}
	}
	if len(pw) == 0 {
		s.report(stepWarn, step, "no app password stored for account "+name, "carapace auth set --plugin mail --key "+name)
		return
	}
	if err := store.Set("mail", name, pw); err != nil {
		s.report(stepFail, step, err.Error(), "carapace auth set --plugin mail --key "+name)
		return
	}
	s.report(stepDone, step, fmt.Sprintf("app password of account %s stored (%d bytes); carapace doctor --online logs in to check it", name, len(pw)), "")
}

// inlineTable writes m's keys, in that order, as a TOML inline table
// (strings and booleans; a key m lacks is left out).
func inlineTable(m map[string]any, keys ...string) string {
	var parts []string
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			parts = append(parts, k+" = "+config.Quote(v))
		case bool:
			parts = append(parts, fmt.Sprintf("%s = %t", k, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
