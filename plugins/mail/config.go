package mail

import (
	"fmt"
	"net"
	"net/mail"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Security is how a connection to a server is protected.
type Security string

// The three kinds of connection.
const (
	SecurityTLS      Security = "tls"      // TLS from the first byte (IMAP 993, SMTP 465)
	SecurityStartTLS Security = "starttls" // plain, then STARTTLS before anything else (IMAP 143, SMTP 587)
	SecurityPlain    Security = "plain"    // no TLS at all: loopback addresses only
)

// Defaults of the config.
const (
	// DefaultDailySendCap is how many mails a group may send a day (UTC)
	// when its entry in groups does not say.
	DefaultDailySendCap = 20
	// MaxDailySendCap bounds daily_send_cap.
	MaxDailySendCap = 1000
)

// Account is one mailbox the plugin reaches.
type Account struct {
	Name         string
	IMAP         string // host:port
	IMAPSecurity Security
	SMTP         string // host:port
	SMTPSecurity Security
	Username     string
	SMTPUsername string // the SMTP login, when it is not Username (iCloud)
	From         *mail.Address
	// Folder overrides; "" finds the folder by its special use, then by name.
	Drafts, Sent, Archive string
	// SaveSent keeps a copy of each sent mail in Sent (default true; off
	// for a server that files what its SMTP sends by itself, as Gmail).
	SaveSent bool
	// InboundGroup, when set, makes new mail in INBOX an event
	// (message.inbound) for that group; InboundSenders narrows it to mail
	// from these addresses (lower case), every sender if empty.
	InboundGroup   string
	InboundSenders []string
}

// groupAccess is what one group may do.
type groupAccess struct {
	Accounts []string // account names; "*" for all
	Cap      int      // mails a day
}

// config is [plugins.mail.config], checked here again (a handler must not
// trust that it runs behind the core).
type config struct {
	Accounts []*Account
	Groups   map[string]groupAccess
	// Allow, when not nil, is the recipient allow-list: addresses and
	// domains ("@example.com": exactly that domain, not its subdomains),
	// lower case.
	Allow []string
	// MaxBody is the most a body (text) may be, in bytes, for a draft.
	MaxBody int
}

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	groupRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// DefaultMaxBody is the largest body mail_draft accepts, in bytes.
const DefaultMaxBody = 256 << 10

// parseConfig reads the config map the core passes to Init.
func parseConfig(m map[string]any) (*config, error) {
	c := &config{Groups: map[string]groupAccess{}, MaxBody: DefaultMaxBody}
	for k, v := range m {
		switch k {
		case "accounts":
			list, ok := v.([]any)
			if !ok {
				if ms, ok2 := v.([]map[string]any); ok2 {
					for _, x := range ms {
						list = append(list, x)
					}
				} else {
					return nil, fmt.Errorf("accounts: want a list of tables ([[plugins.mail.config.accounts]])")
				}
			}
			for i, av := range list {
				am, ok := av.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("accounts[%d]: want a table with name, imap, smtp, username and from", i)
				}
				a, err := parseAccount(am)
				if err != nil {
					return nil, fmt.Errorf("accounts[%d]: %w", i, err)
				}
				if c.account(a.Name) != nil {
					return nil, fmt.Errorf("accounts[%d]: the name %q is used twice", i, a.Name)
				}
				c.Accounts = append(c.Accounts, a)
			}
		case "groups":
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf(`groups: want a table of group = { accounts = ["NAME"], daily_send_cap = N }`)
			}
			for g, gv := range obj {
				if !groupRE.MatchString(g) {
					return nil, fmt.Errorf("groups: %q is not a group name", textutil.Clip(g, 40))
				}
				ga, err := parseGroup(gv)
				if err != nil {
					return nil, fmt.Errorf("groups.%s: %w", g, err)
				}
				c.Groups[g] = ga
			}
		case "recipient_allowlist":
			arr, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf(`recipient_allowlist: want a list of addresses and domains, e.g. ["alice@example.com", "@example.org"]`)
			}
			c.Allow = []string{}
			for _, x := range arr {
				s, _ := x.(string)
				s = strings.ToLower(strings.TrimSpace(s))
				if d, ok := strings.CutPrefix(s, "@"); ok {
					if !validDomain(d) {
						return nil, fmt.Errorf("recipient_allowlist: %q is not @domain", textutil.Clip(s, 80))
					}
				} else if _, err := parseOneAddress(s); err != nil {
					return nil, fmt.Errorf("recipient_allowlist: %q is neither an address nor @domain", textutil.Clip(s, 80))
				}
				c.Allow = append(c.Allow, s)
			}
		case "max_body_bytes":
			n, err := plugin.Int(v)
			if err != nil || n < 1024 || n > 4<<20 {
				return nil, fmt.Errorf("max_body_bytes: want a number of bytes from 1024 to 4194304")
			}
			c.MaxBody = int(n)
		default:
			return nil, fmt.Errorf("unknown setting %q: the mail plugin takes accounts, groups, recipient_allowlist and max_body_bytes", textutil.Clip(k, 40))
		}
	}
	for g, ga := range c.Groups {
		for _, a := range ga.Accounts {
			if a != "*" && c.account(a) == nil {
				return nil, fmt.Errorf("groups.%s: no account is named %q", g, a)
			}
		}
	}
	return c, nil
}

func parseGroup(v any) (groupAccess, error) {
	ga := groupAccess{Cap: DefaultDailySendCap}
	obj, ok := v.(map[string]any)
	if !ok {
		return ga, fmt.Errorf(`want a table: { accounts = ["NAME"], daily_send_cap = N }`)
	}
	for k, x := range obj {
		switch k {
		case "accounts":
			arr, ok := x.([]any)
			if !ok {
				return ga, fmt.Errorf(`accounts: want a list of account names, or ["*"] for all`)
			}
			for _, y := range arr {
				s, _ := y.(string)
				if s != "*" && !nameRE.MatchString(s) {
					return ga, fmt.Errorf("accounts: %q is not an account name", textutil.Clip(s, 40))
				}
				ga.Accounts = append(ga.Accounts, s)
			}
		case "daily_send_cap":
			n, err := plugin.Int(x)
			if err != nil || n < 0 || n > MaxDailySendCap {
				return ga, fmt.Errorf("daily_send_cap: want a number of mails a day from 0 (none) to %d", MaxDailySendCap)
			}
			ga.Cap = int(n)
		default:
			return ga, fmt.Errorf("unknown setting %q: a group takes accounts and daily_send_cap", textutil.Clip(k, 40))
		}
	}
	return ga, nil
}

func parseAccount(m map[string]any) (*Account, error) {
	a := &Account{IMAPSecurity: SecurityTLS, SMTPSecurity: SecurityTLS, SaveSent: true}
	str := func(k string, v any) (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: want a string", k)
		}
		if strings.ContainsAny(s, "\r\n\x00") {
			return "", fmt.Errorf("%s: a line break or NUL is not allowed", k)
		}
		return s, nil
	}
	for k, v := range m {
		var s string
		var err error
		if k == "save_sent" {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("save_sent: want true or false")
			}
			a.SaveSent = b
			continue
		}
		if k != "inbound_senders" {
			if s, err = str(k, v); err != nil {
				return nil, err
			}
		}
		switch k {
		case "name":
			if !nameRE.MatchString(s) {
				return nil, fmt.Errorf("name: %q: want 1 to 32 of a-z, 0-9, _ and - (it is also the credential's key)", textutil.Clip(s, 40))
			}
			a.Name = s
		case "imap", "smtp":
			if err := checkHostPort(s); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if k == "imap" {
				a.IMAP = s
			} else {
				a.SMTP = s
			}
		case "imap_security", "smtp_security":
			sec := Security(s)
			if sec != SecurityTLS && sec != SecurityStartTLS && sec != SecurityPlain {
				return nil, fmt.Errorf(`%s: want "tls", "starttls" or "plain"`, k)
			}
			if k == "imap_security" {
				a.IMAPSecurity = sec
			} else {
				a.SMTPSecurity = sec
			}
		case "username", "smtp_username":
			if s == "" || len(s) > 320 {
				return nil, fmt.Errorf("%s: want the login name (often the address)", k)
			}
			if k == "username" {
				a.Username = s
			} else {
				a.SMTPUsername = s
			}
		case "from":
			addr, err := parseOneAddress(s)
			if err != nil {
				return nil, fmt.Errorf("from: %q is not an address such as \"Ann <ann@example.com>\"", textutil.Clip(s, 80))
			}
			a.From = addr
		case "drafts_folder", "sent_folder", "archive_folder":
			if s == "" || len(s) > 200 {
				return nil, fmt.Errorf("%s: want a folder name", k)
			}
			switch k {
			case "drafts_folder":
				a.Drafts = s
			case "sent_folder":
				a.Sent = s
			default:
				a.Archive = s
			}
		case "inbound_group":
			if !groupRE.MatchString(s) {
				return nil, fmt.Errorf("inbound_group: %q is not a group name", textutil.Clip(s, 40))
			}
			a.InboundGroup = s
		case "inbound_senders":
			arr, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf(`inbound_senders: want a list of addresses, e.g. ["boss@example.com"]`)
			}
			for _, x := range arr {
				s, _ := x.(string)
				addr, err := parseOneAddress(s)
				if err != nil {
					return nil, fmt.Errorf("inbound_senders: %q is not an address", textutil.Clip(s, 80))
				}
				a.InboundSenders = append(a.InboundSenders, strings.ToLower(addr.Address))
			}
		default:
			return nil, fmt.Errorf("unknown setting %q: an account takes name, imap, imap_security, smtp, smtp_security, username, smtp_username, from, drafts_folder, sent_folder, archive_folder, save_sent, inbound_group and inbound_senders", textutil.Clip(k, 40))
		}
	}
	var missing []string
	for _, f := range []struct {
		k  string
		ok bool
	}{{"name", a.Name != ""}, {"imap", a.IMAP != ""}, {"smtp", a.SMTP != ""}, {"username", a.Username != ""}, {"from", a.From != nil}} {
		if !f.ok {
			missing = append(missing, f.k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if a.SMTPUsername == "" {
		a.SMTPUsername = a.Username
	}
	for _, s := range []struct {
		k, addr string
		sec     Security
	}{{"imap", a.IMAP, a.IMAPSecurity}, {"smtp", a.SMTP, a.SMTPSecurity}} {
		if s.sec == SecurityPlain && !loopbackHost(s.addr) {
			return nil, fmt.Errorf(`%s_security = "plain" sends the password unencrypted: it is allowed only to a loopback address (127.0.0.1, ::1, localhost), not %s; use "tls" or "starttls"`, s.k, s.addr)
		}
	}
	return a, nil
}

// checkHostPort checks "host:port" (the form network.hosts_from_config
// reads): a name or an IP literal, and a port.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q: want host:port, e.g. imap.fastmail.com:993", textutil.Clip(s, 80))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", textutil.Clip(s, 80))
	}
	if _, err := netip.ParseAddr(host); err != nil && !validDomain(host) {
		return fmt.Errorf("%q: %q is neither a host name nor an IP address", textutil.Clip(s, 80), textutil.Clip(host, 80))
	}
	return nil
}

// loopbackHost reports whether host:port names the loopback.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

func validDomain(d string) bool {
	if d == "" || len(d) > 253 {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(d, "."), ".") {
		if !labelRE.MatchString(l) {
			return false
		}
	}
	return true
}

func (c *config) account(name string) *Account {
	for _, a := range c.Accounts {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// accountsFor returns the accounts group may use, in config order. A
// group not named in groups may use none: mail is someone's private
// correspondence, so access is granted, never assumed.
func (c *config) accountsFor(group string) []*Account {
	ga, ok := c.Groups[group]
	if !ok {
		return nil
	}
	var out []*Account
	for _, a := range c.Accounts {
		if slices.Contains(ga.Accounts, "*") || slices.Contains(ga.Accounts, a.Name) {
			out = append(out, a)
		}
	}
	return out
}

// capFor returns group's daily send cap (0 when the group has no access).
func (c *config) capFor(group string) int {
	if ga, ok := c.Groups[group]; ok {
		return ga.Cap
	}
	return 0
}

// allowed reports whether the allow-list admits addr (lower case
// compared); true when there is no allow-list.
func (c *config) allowed(addr string) bool {
	if c.Allow == nil {
		return true
	}
	addr = strings.ToLower(addr)
	_, domain, _ := strings.Cut(addr, "@")
	for _, a := range c.Allow {
		if a == addr || a == "@"+domain {
			return true
		}
	}
	return false
}
