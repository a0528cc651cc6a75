package mail

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/carapace-dev/carapace/core/plugin"
)

// msgID is what a mail's id says: where the mail is. Ids are opaque to
// the agent; a folder whose UIDVALIDITY changed makes its ids stale.
type msgID struct {
	Account     string
	Folder      string
	UIDValidity uint32
	UID         imap.UID
}

const idPrefix = "m1_"

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// String encodes the id: m1_ then base64url of
// "account/uidvalidity/uid/folder" (the folder last: it may hold '/').
func (id msgID) String() string {
	raw := id.Account + "/" + strconv.FormatUint(uint64(id.UIDValidity), 10) + "/" + strconv.FormatUint(uint64(id.UID), 10) + "/" + id.Folder
	return idPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseID decodes an id; field names the argument it came in.
func parseID(field, s string) (msgID, error) {
	bad := toolErr(CodeInvalidID, field, "%s: not a mail id of this plugin (ids come from mail_search, mail_read and mail_draft)", field)
	rest, ok := strings.CutPrefix(s, idPrefix)
	if !ok || len(s) > 2048 || !idRE.MatchString(rest) {
		return msgID{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return msgID{}, bad
	}
	parts := strings.SplitN(string(raw), "/", 4)
	if len(parts) != 4 || !nameRE.MatchString(parts[0]) || parts[3] == "" || strings.ContainsAny(parts[3], "\r\n\x00") {
		return msgID{}, bad
	}
	v, err1 := strconv.ParseUint(parts[1], 10, 32)
	u, err2 := strconv.ParseUint(parts[2], 10, 32)
	if err1 != nil || err2 != nil || v == 0 || u == 0 {
		return msgID{}, bad
	}
	return msgID{Account: parts[0], UIDValidity: uint32(v), UID: imap.UID(u), Folder: parts[3]}, nil
}

// conn is one logged-in IMAP connection.
type conn struct {
	c       *imapclient.Client
	account *Account
}

func (c *conn) close() {
	_ = c.c.Logout().Wait()
	_ = c.c.Close()
}

// tlsConfig returns the TLS config for host: Options.TLSConfig's, else
// the system's roots; the server name is always set.
func (h *Handler) tlsConfig(hostport string) *tls.Config {
	host, _, _ := net.SplitHostPort(hostport)
	var cfg *tls.Config
	if h.opts.TLSConfig != nil {
		cfg = h.opts.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg
}

// dialSecure dials addr through the egress point and secures the
// connection for implicit TLS (the STARTTLS upgrade is the protocol's).
func (h *Handler) dialSecure(ctx context.Context, addr string, sec Security) (net.Conn, error) {
	c, err := h.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if sec != SecurityTLS {
		return c, nil
	}
	tc := tls.Client(c, h.tlsConfig(addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS with %s: %w", addr, err)
	}
	return tc, nil
}

// password reads the account's password (its credential).
func (h *Handler) password(ctx context.Context, a *Account) (string, error) {
	pw, err := h.services.ReadCredential(ctx, a.Name)
	if err != nil || pw == "" {
		if err != nil && !errors.Is(err, plugin.ErrNoCredential) {
			h.log.Warn("credential unreadable", "account", a.Name, "err", err)
		}
		return "", toolErr(CodeNoPassword, "account", "account %s has no password: the user sets it with `carapace auth set --plugin mail --key %s` (an app password), then `carapace plugin restart mail`", a.Name, a.Name)
	}
	return pw, nil
}

// connect opens an IMAP connection to the account and logs in. The
// connection's deadline is ctx's, if any.
func (h *Handler) connect(ctx context.Context, a *Account, handler *imapclient.UnilateralDataHandler) (*conn, error) {
	pw, err := h.password(ctx, a)
	if err != nil {
		return nil, err
	}
	nc, err := h.dialSecure(ctx, a.IMAP, a.IMAPSecurity)
	if err != nil {
		h.log.Warn("imap connect failed", "account", a.Name, "err", err)
		return nil, &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("cannot reach the IMAP server of account %s (%s)", a.Name, a.IMAP)}
	}
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	opts := &imapclient.Options{TLSConfig: h.tlsConfig(a.IMAP), UnilateralDataHandler: handler,
		WordDecoder: wordDecoder()}
	var c *imapclient.Client
	if a.IMAPSecurity == SecurityStartTLS {
		c, err = imapclient.NewStartTLS(nc, opts)
		if err != nil {
			h.log.Warn("imap starttls failed", "account", a.Name, "err", err)
			return nil, &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("STARTTLS with the IMAP server of account %s failed", a.Name)}
		}
	} else {
		c = imapclient.New(nc, opts)
	}
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("the IMAP server of account %s did not greet", a.Name)}
	}
	if err := c.Login(a.Username, pw).Wait(); err != nil {
		c.Close()
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil, toolErr(CodeAuthFailed, "account", "the IMAP server of account %s refused the login of %s: check the username and the app password (carapace auth set --plugin mail --key %s)", a.Name, a.Username, a.Name)
		}
		return nil, &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: fmt.Sprintf("the connection to the IMAP server of account %s broke during login", a.Name)}
	}
	return &conn{c: c, account: a}, nil
}

// serverErr turns an IMAP command's failure into a tool error.
func serverErr(what string, err error) error {
	var ie *imap.Error
	if errors.As(err, &ie) {
		return toolErr(CodeServer, "", "%s: the server said: %s", what, clipQ(ie.Text))
	}
	return &plugin.ToolError{Code: CodeConnect, Retriable: true, Message: what + ": the connection to the server broke"}
}

// selectFolder selects folder and returns its UIDVALIDITY.
func (c *conn) selectFolder(folder string, readOnly bool) (*imap.SelectData, error) {
	d, err := c.c.Select(folder, &imap.SelectOptions{ReadOnly: readOnly}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil, toolErr(CodeNoFolder, "folder", "account %s has no folder %q (the server said: %s)", c.account.Name, clipQ(folder), clipQ(ie.Text))
		}
		return nil, serverErr("select "+folder, err)
	}
	return d, nil
}

// open selects the id's folder and checks its UIDVALIDITY.
func (c *conn) open(id msgID, field string, readOnly bool) error {
	d, err := c.selectFolder(id.Folder, readOnly)
	if err != nil {
		return err
	}
	if d.UIDValidity != id.UIDValidity {
		return toolErr(CodeStaleID, field, "%s is stale: the folder %q was rebuilt on the server (UIDVALIDITY changed), so its old ids mean nothing; search again for a fresh id", field, clipQ(id.Folder))
	}
	return nil
}

// fetchRaw fetches a message's bytes (at most max; truncated reports
// whether there was more) without setting \Seen.
func (c *conn) fetchRaw(id msgID, field string, max int64) (raw []byte, flags []imap.Flag, truncated bool, err error) {
	section := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: max}}
	bufs, err := c.c.Fetch(imap.UIDSetNum(id.UID), &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true,
		BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return nil, nil, false, serverErr("fetch", err)
	}
	for _, b := range bufs {
		if b.UID != id.UID {
			continue
		}
		raw = b.FindBodySection(section)
		return raw, b.Flags, b.RFC822Size > int64(len(raw)), nil
	}
	return nil, nil, false, toolErr(CodeNotFound, field, "no mail with this id: it was moved or deleted; search again")
}

// Special uses, and the names a folder is found by without one.
var (
	draftsNames  = []string{"Drafts", "INBOX.Drafts", "INBOX/Drafts", "[Gmail]/Drafts", "Draft", "Entwürfe"}
	sentNames    = []string{"Sent", "INBOX.Sent", "INBOX/Sent", "[Gmail]/Sent Mail", "Sent Messages", "Sent Items"}
	archiveNames = []string{"Archive", "INBOX.Archive", "INBOX/Archive", "Archives", "[Gmail]/All Mail"}
)

// pickFolder chooses among listed folders: the one with the special use,
// else the first of names that exists (case-insensitively), else "".
func pickFolder(list []*imap.ListData, use imap.MailboxAttr, names []string) string {
	for _, l := range list {
		for _, a := range l.Attrs {
			if strings.EqualFold(string(a), string(use)) {
				return l.Mailbox
			}
		}
	}
	for _, n := range names {
		for _, l := range list {
			if strings.EqualFold(l.Mailbox, n) {
				return l.Mailbox
			}
		}
	}
	return ""
}

// folder finds the account's folder of a special use: the configured
// one, else by pickFolder.
func (c *conn) folder(use imap.MailboxAttr) (string, error) {
	var conf string
	var names []string
	switch use {
	case imap.MailboxAttrDrafts:
		conf, names = c.account.Drafts, draftsNames
	case imap.MailboxAttrSent:
		conf, names = c.account.Sent, sentNames
	default:
		conf, names = c.account.Archive, archiveNames
	}
	if conf != "" {
		return conf, nil
	}
	opts := &imap.ListOptions{}
	if c.c.Caps().Has(imap.CapSpecialUse) {
		opts.ReturnSpecialUse = true
	}
	list, err := c.c.List("", "*", opts).Collect()
	if err != nil {
		return "", serverErr("list folders", err)
	}
	f := pickFolder(list, use, names)
	if f == "" {
		what := strings.TrimPrefix(string(use), `\`)
		return "", toolErr(CodeNoFolder, "", "account %s has no %s folder (none marked %s, none named %s): set %s_folder in the account's config", c.account.Name, what, use, names[0], strings.ToLower(what))
	}
	return f, nil
}
