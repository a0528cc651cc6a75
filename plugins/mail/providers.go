package mail

import "strings"

// Provider is a mail provider whose servers are known, so that an account
// is set up from its address alone (`carapace setup`); docs/MAIL.md's
// provider table says the same.
type Provider struct {
	// Name is the provider's name ("fastmail").
	Name string
	// IMAP and SMTP are the servers as host:port, with their security
	// (SecurityTLS or SecurityStartTLS).
	IMAP, SMTP                 string
	IMAPSecurity, SMTPSecurity Security
	// SaveSent is false for a provider that files sent mail by itself.
	SaveSent bool
	// AppPasswords says where the user makes an app password.
	AppPasswords string
}

// providers by the domains of their addresses.
var providers = []struct {
	domains []string
	p       Provider
}{
	{[]string{"fastmail.com", "fastmail.fm", "fastmail.org"}, Provider{Name: "fastmail", IMAP: "imap.fastmail.com:993", IMAPSecurity: SecurityTLS,
		SMTP: "smtp.fastmail.com:465", SMTPSecurity: SecurityTLS, SaveSent: true, AppPasswords: "Fastmail: Settings → Privacy & Security → Manage app passwords"}},
	{[]string{"icloud.com", "me.com", "mac.com"}, Provider{Name: "icloud", IMAP: "imap.mail.me.com:993", IMAPSecurity: SecurityTLS,
		SMTP: "smtp.mail.me.com:587", SMTPSecurity: SecurityStartTLS, SaveSent: true, AppPasswords: "appleid.apple.com → Sign-In and Security → App-Specific Passwords"}},
	{[]string{"gmail.com", "googlemail.com"}, Provider{Name: "gmail", IMAP: "imap.gmail.com:993", IMAPSecurity: SecurityTLS,
		SMTP: "smtp.gmail.com:465", SMTPSecurity: SecurityTLS, SaveSent: false, AppPasswords: "myaccount.google.com → Security → 2-Step Verification → App passwords"}},
}

// ProviderFor returns the provider of address's domain, if it is one of
// the known ones.
func ProviderFor(address string) (Provider, bool) {
	_, domain, ok := strings.Cut(strings.ToLower(strings.TrimSpace(address)), "@")
	if !ok {
		return Provider{}, false
	}
	for _, e := range providers {
		for _, d := range e.domains {
			if domain == d {
				return e.p, true
			}
		}
	}
	return Provider{}, false
}

// SecurityFor is the security a server's port usually has: TLS on 993
// and 465, STARTTLS on any other.
func SecurityFor(hostPort string) Security {
	if strings.HasSuffix(hostPort, ":993") || strings.HasSuffix(hostPort, ":465") {
		return SecurityTLS
	}
	return SecurityStartTLS
}
