package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/carapace-dev/carapace/core/plugin"
)

// normalise makes a config as config.toml decodes it look as the core
// hands it to Init: through JSON, numbers as json.Number.
func normalise(cfg map[string]any) (map[string]any, error) {
	if cfg == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// AccountNames parses [plugins.mail.config] as the plugin does and
// returns its accounts' names, which are also their credentials' keys
// (for `carapace doctor`).
func AccountNames(cfg map[string]any) ([]string, error) {
	n, err := normalise(cfg)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(n)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(c.Accounts))
	for i, a := range c.Accounts {
		names[i] = a.Name
	}
	return names, nil
}

// VerifyAccounts logs in to every account's IMAP and SMTP server and out
// again, changing nothing, from this process (`carapace doctor
// --online`): the plugin's Verify, with password giving each account's
// password and dial reaching the servers.
func VerifyAccounts(ctx context.Context, cfg map[string]any, password func(account string) (string, error), dial DialFunc) (*plugin.VerifyResult, error) {
	n, err := normalise(cfg)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(n)
	if err != nil {
		return nil, fmt.Errorf("[plugins.mail.config] %w", err)
	}
	h := New(Options{Dial: dial, Logger: slog.New(slog.DiscardHandler)})
	h.cfg, h.services = c, passwords(password)
	return h.Verify(ctx)
}

// passwords is the one service Verify uses: ReadCredential.
type passwords func(account string) (string, error)

// ReadCredential implements the part of plugin.Services Verify calls.
func (p passwords) ReadCredential(_ context.Context, key string) (string, error) { return p(key) }

// The rest of plugin.Services: not used by Verify.
func (passwords) GetAuditLog(context.Context, plugin.AuditFilter) ([]plugin.AuditEntry, error) {
	return nil, plugin.ErrNoRequest
}
func (passwords) GetToolCatalog(context.Context) ([]plugin.ToolInfo, error) { return nil, nil }
func (passwords) GetSessionInfo(context.Context) (plugin.SessionInfo, error) {
	return plugin.SessionInfo{}, plugin.ErrNoRequest
}
func (passwords) PublishEvent(context.Context, *plugin.Event) error { return plugin.ErrNotChannel }
func (passwords) AuditDropped(context.Context, string) error        { return plugin.ErrNotChannel }
func (passwords) ReportHealth(context.Context, bool, string) error  { return nil }
func (passwords) Paused(context.Context) (bool, error)              { return false, plugin.ErrNotChannel }
func (passwords) Decide(context.Context, plugin.Decision) error     { return plugin.ErrNotSurface }
func (passwords) CoreStatus(context.Context) (plugin.CoreStatus, error) {
	return plugin.CoreStatus{}, plugin.ErrNotSurface
}
func (passwords) SetPaused(context.Context, bool) error     { return plugin.ErrNotSurface }
func (passwords) StopSession(context.Context, string) error { return plugin.ErrNotSurface }
