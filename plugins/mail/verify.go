package mail

import (
	"context"
	"fmt"
	"strings"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Verify implements plugin.Verifier: it logs in to every account's IMAP
// and SMTP server (and out again), changing nothing, and says which work.
// It is what `carapace doctor --online` asks of the running plugin: the
// logins go out as the tools' do, through the plugin's confinement and
// its egress point.
func (h *Handler) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	if h.cfg == nil || len(h.cfg.Accounts) == 0 {
		return &plugin.VerifyResult{OK: false, Message: "no mail account is configured ([[plugins.mail.config.accounts]])"}, nil
	}
	ok := true
	var lines []string
	for _, a := range h.cfg.Accounts {
		imapErr := h.verifyIMAP(ctx, a)
		smtpErr := h.verifySMTP(ctx, a)
		if imapErr == nil && smtpErr == nil {
			lines = append(lines, fmt.Sprintf("%s: IMAP and SMTP logins work", a.Name))
			continue
		}
		ok = false
		for _, e := range []struct {
			what string
			err  error
		}{{"IMAP", imapErr}, {"SMTP", smtpErr}} {
			if e.err == nil {
				continue
			}
			msg := "failed"
			if te, isTool := plugin.AsToolError(e.err); isTool {
				msg = te.Message
			}
			lines = append(lines, fmt.Sprintf("%s: %s: %s", a.Name, e.what, msg))
		}
	}
	r := &plugin.VerifyResult{OK: ok, Message: strings.Join(lines, "; ")}
	if !ok {
		r.Fix = "check the servers and usernames in [plugins.mail.config] and the app passwords (carapace auth set --plugin mail --key ACCOUNT), then carapace plugin restart mail"
	}
	return r, nil
}

func (h *Handler) verifyIMAP(ctx context.Context, a *Account) error {
	c, err := h.connect(ctx, a, nil)
	if err != nil {
		return err
	}
	c.close()
	return nil
}

// verifySMTP connects, says hello and logs in, then quits: no mail.
func (h *Handler) verifySMTP(ctx context.Context, a *Account) error {
	pw, err := h.password(ctx, a)
	if err != nil {
		return err
	}
	nc, err := h.dialSecure(ctx, a.SMTP, a.SMTPSecurity)
	if err != nil {
		return toolErr(CodeConnect, "", "cannot reach %s", a.SMTP)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	var c *smtp.Client
	if a.SMTPSecurity == SecurityStartTLS {
		if c, err = smtp.NewClientStartTLS(nc, h.tlsConfig(a.SMTP)); err != nil {
			nc.Close()
			return toolErr(CodeConnect, "", "STARTTLS with %s failed", a.SMTP)
		}
	} else {
		c = smtp.NewClient(nc)
	}
	defer c.Close()
	_, domain, _ := strings.Cut(a.From.Address, "@")
	if err := c.Hello(domain); err != nil {
		return toolErr(CodeConnect, "", "the connection to %s failed (TLS, or the server went away)", a.SMTP)
	}
	if err := c.Auth(sasl.NewPlainClient("", a.SMTPUsername, pw)); err != nil {
		return toolErr(CodeAuthFailed, "", "%s refused the login of %s: check the app password", a.SMTP, a.SMTPUsername)
	}
	_ = c.Quit()
	return nil
}
