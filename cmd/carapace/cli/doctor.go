package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/llmproxy"
	"github.com/carapace-dev/carapace/internal/appstate"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/mail"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// Check is one of doctor's findings.
type Check struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok, warn, fail
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"` // the command that fixes it
}

// Check statuses.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
)

func (a *app) doctorCmd() *cobra.Command {
	var asJSON, online, prove bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check this Carapace: each finding with what is wrong and the command that fixes it",
		Long: `Check the home (folders 0700, files 0600), config.toml, the core (running,
and the same version as this carapace), its plugins' health, the user
plugins' pins, the model API credential of each upstream in config.toml
(and with --online, that the model API accepts it, and for Ollama that it
has the models the groups name), with --online each running plugin's own
check of its setup (the calendar logs in and lists your calendars), the
Telegram channel, the mail accounts' passwords (with --online the mail
plugin's own check logs in to their servers), the menu-bar app's
notification permission and login item (while the app runs: only it can
read them), the audit log, the container engine and the agent image, and
scheduled tasks overdue. Each check says
ok, warn or fail, what is wrong and the command that fixes it. Exit
status 1 when any check fails.

Nothing leaves this machine unless --online is given: then one request
per upstream, which costs no tokens, goes to it with its credential in its
own style: GET /v1/models, or for Ollama GET /api/tags (its model list);
and each running plugin that has a check of its own runs it, from its
process, through its own egress point (the calendar plugin logs in to its
CalDAV server and lists the calendars; the mail plugin logs in to each
account's IMAP and SMTP servers and out again, reading and sending
nothing; Telegram asks the Bot API who the bot is). A failing check says
what the plugin found and its fix.

With --prove, doctor does not read settings but proves them: the running
core starts a probe plugin under the confinement every plugin gets and a
container built exactly as every agent session's is, with the configured
engine, and each tries from inside what the core promises it cannot do —
a route out of the box (a public IP, the host and the engine's bridge,
DNS), a write to its root, a capability, root, a model key anywhere in
it, the model API other than through the core's proxy; for the plugin,
a file outside its folders (the credentials, config.toml, a canary), the
control socket, the core, a socket of its own, an undeclared host. Each
refusal is printed beside its positive control from the same run (the
same probe succeeding where it must), so that a probe that cannot work
proves nothing. It is what lets you check, on a Mac or any machine, what
the project's own tests cannot. It takes some seconds; nothing leaves
this machine (the model API request is answered by the core's proxy).
It belongs to doctor, not to a command of its own, because it answers
doctor's question — is this Carapace safe to use here? — with evidence
rather than configuration. Exit status 1 when any promise fails.`,
		Example: "  carapace doctor\n  carapace doctor --online\n  carapace doctor --prove\n  carapace doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prove {
				failed, err := a.prove(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON)
				if err != nil {
					return err
				}
				if failed > 0 {
					return exitCode(1)
				}
				return nil
			}
			checks, err := a.doctor(cmd.Context(), online)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			failed := 0
			for _, c := range checks {
				if c.Status == checkFail {
					failed++
				}
			}
			if asJSON {
				if err := writeJSON(out, checks); err != nil {
					return err
				}
			} else {
				for _, c := range checks {
					fmt.Fprintf(out, "%-4s  %-12s %s\n", c.Status, c.Name, printable(c.Message))
					if c.Fix != "" {
						fmt.Fprintf(out, "      %-12s fix: %s\n", "", printable(c.Fix))
					}
				}
			}
			if failed > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "carapace: %d check(s) failed\n", failed)
				return exitCode(1)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	c.Flags().BoolVar(&online, "online", false, "also ask each model API whether it accepts the credential (one GET /v1/models, or /api/tags for Ollama), and have each running plugin check its own setup (the calendar logs in)")
	c.Flags().BoolVar(&prove, "prove", false, "instead of the checks, have the running core prove each promise from inside a real plugin and a real agent container (some seconds)")
	c.MarkFlagsMutuallyExclusive("prove", "online")
	return c
}

// doctor runs every check.
func (a *app) doctor(ctx context.Context, online bool) ([]Check, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	var checks []Check
	add := func(c Check) { checks = append(checks, c) }
	add(checkHome(h))
	cfg, cfgCheck := checkConfig(h)
	add(cfgCheck)
	st, coreCheck := a.checkCore(ctx, h)
	add(coreCheck)
	if st != nil && cfg != nil && st.ConfigDigest != "" && st.ConfigDigest != cfg.Digest {
		add(Check{Name: "config in use", Status: checkWarn, Message: "config.toml changed since the core started; the core reads it only at start",
			Fix: "carapace stop && carapace serve"})
	}
	if st != nil {
		add(checkPlugins(st))
		if online {
			checks = append(checks, a.checkPluginsOnline(ctx, st)...)
		}
	}
	add(checkPins(h, a.cfg.Version))
	add(checkConfinement(cfg, st, confine.Probe()))
	add(checkNetwork(cfg))
	checks = append(checks, a.checkModelAPIs(ctx, cfg, online)...)
	add(a.checkTelegram(ctx, h, st))
	add(a.checkMail(cfg))
	checks = append(checks, checkApp(h, usesEventKit(cfg))...)
	add(checkAudit(h))
	if cfg != nil {
		checks = append(checks, a.checkEngineAndImage(ctx, cfg)...)
	}
	if st != nil {
		add(a.checkTasks(ctx))
	}
	return checks, nil
}

// checkHome checks the modes of the home's folders and files.
func checkHome(h home.Dir) Check {
	c := Check{Name: "home", Status: checkOK, Message: string(h)}
	fi, err := os.Stat(string(h))
	if errors.Is(err, fs.ErrNotExist) {
		return Check{Name: "home", Status: checkFail, Message: string(h) + " does not exist", Fix: "carapace serve (it creates it)"}
	}
	if err != nil || !fi.IsDir() {
		return Check{Name: "home", Status: checkFail, Message: string(h) + " is not a folder"}
	}
	var wrong []string
	var fix []string
	for _, d := range []string{string(h), h.RunDir(), h.LogsDir(), h.Path("data"), h.PluginsDir(), h.CredentialsDir(), h.ConversationsDir()} {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o077 != 0 {
			wrong = append(wrong, fmt.Sprintf("%s is %04o", d, fi.Mode().Perm()))
			fix = append(fix, "chmod 700 "+shellQuote(d))
		}
	}
	for _, f := range []string{h.Config(), h.Pins(), h.AuditLog(), h.TasksDB()} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm()&0o077 != 0 {
			wrong = append(wrong, fmt.Sprintf("%s is %04o", f, fi.Mode().Perm()))
			fix = append(fix, "chmod 600 "+shellQuote(f))
		}
	}
	if len(wrong) > 0 {
		c.Status, c.Message, c.Fix = checkFail, "open to others: "+strings.Join(wrong, ", "), strings.Join(fix, " && ")
	}
	return c
}

// checkConfig validates config.toml.
func checkConfig(h home.Dir) (*config.Config, Check) {
	probs, err := config.Validate(h.Config())
	if err != nil {
		return nil, Check{Name: "config", Status: checkFail, Message: err.Error()}
	}
	if len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.String()
		}
		return nil, Check{Name: "config", Status: checkFail, Message: "config.toml would not load: " + strings.Join(msgs, "; "), Fix: "carapace config edit"}
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		return nil, Check{Name: "config", Status: checkFail, Message: err.Error(), Fix: "carapace config edit"}
	}
	msg := h.Config()
	if _, err := os.Stat(h.Config()); errors.Is(err, fs.ErrNotExist) {
		msg += " (absent: the defaults)"
	}
	return cfg, Check{Name: "config", Status: checkOK, Message: msg}
}

// checkCore asks the core for its status.
func (a *app) checkCore(ctx context.Context, h home.Dir) (*api.Status, Check) {
	c, _, err := a.client()
	if err != nil {
		return nil, Check{Name: "core", Status: checkFail, Message: err.Error()}
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	st, err := c.Status(cctx)
	if errors.Is(err, control.ErrNotRunning) {
		return nil, Check{Name: "core", Status: checkWarn, Message: "not running", Fix: "carapace serve (or carapace service install)"}
	}
	if err != nil {
		return nil, Check{Name: "core", Status: checkFail, Message: oneLine(err.Error())}
	}
	if st.Version != a.cfg.Version {
		return &st, Check{Name: "core", Status: checkWarn, Message: fmt.Sprintf("running version %s, this carapace is %s", st.Version, a.cfg.Version),
			Fix: "carapace stop && carapace serve"}
	}
	return &st, Check{Name: "core", Status: checkOK, Message: fmt.Sprintf("running, version %s, pid %d", st.Version, st.PID)}
}

// checkPlugins reports the plugins that do not serve: a plugin the core
// is starting again after a crash is a warning, one that is down (it
// crashed too often) or failed is a failure, with the restart that fixes
// it.
func checkPlugins(st *api.Status) Check {
	var bad, fix, restarting []string
	for _, p := range st.Plugins {
		switch {
		case p.Healthy:
		case p.State == api.PluginRestarting:
			restarting = append(restarting, p.Name)
		case p.State == api.PluginDown:
			bad = append(bad, p.Name+" (down after repeated crashes)")
			fix = append(fix, "carapace plugin restart "+p.Name)
		default:
			bad = append(bad, p.Name+" ("+p.State+")")
			fix = append(fix, "carapace plugin restart "+p.Name)
		}
	}
	also := ""
	if len(restarting) > 0 {
		also = "; restarting after a crash: " + strings.Join(restarting, ", ")
	}
	switch {
	case len(bad) > 0:
		return Check{Name: "plugins", Status: checkFail, Message: "not serving: " + strings.Join(bad, ", ") + also + " (carapace plugin list says why)", Fix: strings.Join(fix, " && ")}
	case len(restarting) > 0:
		return Check{Name: "plugins", Status: checkWarn, Message: "restarting after a crash: " + strings.Join(restarting, ", ") + " (carapace plugin list says why and when)",
			Fix: "none needed: the core starts them again; one that keeps crashing goes down, then carapace plugin restart NAME"}
	}
	return Check{Name: "plugins", Status: checkOK, Message: fmt.Sprintf("%d healthy", len(st.Plugins))}
}

// checkModelAPIs checks each upstream of config.toml ([llm]'s, and each
// [llm.upstreams.NAME] a group names): its credential and, online, the
// upstream itself. Without a config.toml that loads, the anthropic
// default is checked.
func (a *app) checkModelAPIs(ctx context.Context, cfg *config.Config, online bool) []Check {
	if cfg == nil {
		return []Check{a.checkModelAPI(ctx, nil, "", config.LLMUpstream{Provider: llmproxy.ProviderAnthropic}, nil, online)}
	}
	used := map[string]bool{"": true}
	want := map[string][]string{}
	addWant := func(name string, ms ...string) {
		for _, m := range ms {
			if m != "" && !slices.Contains(want[name], m) {
				want[name] = append(want[name], m)
			}
		}
	}
	addWant("", cfg.LLM.Model)
	for _, g := range slices.Sorted(maps.Keys(cfg.Groups)) {
		name, up := cfg.UpstreamFor(g)
		used[name] = true
		model, small := cfg.ModelsFor(g)
		addWant(name, up.Model, model, small)
	}
	var out []Check
	for _, name := range slices.Sorted(maps.Keys(used)) {
		up := cfg.LLM.DefaultUpstream()
		if name != "" {
			up = cfg.LLM.Upstreams[name]
		}
		out = append(out, a.checkModelAPI(ctx, cfg, name, up, want[name], online))
	}
	return out
}

// checkModelAPI looks for the credential of upstream up (named name; ""
// is [llm]'s) and, online, asks it once, in its own credential style,
// whether it answers and takes the credential: GET /v1/models?limit=1, or
// for Ollama GET /api/tags, which also lists its models, so that a model
// a group names and Ollama has not pulled is reported with the command
// that pulls it.
func (a *app) checkModelAPI(ctx context.Context, cfg *config.Config, name string, up config.LLMUpstream, models []string, online bool) Check {
	check := "model key"
	if name != "" {
		check = "model key " + name
	}
	provider := cmp.Or(up.Provider, llmproxy.ProviderAnthropic)
	setFix := "carapace auth set --llm " + provider
	store, err := a.credentials()
	if err != nil {
		return Check{Name: check, Status: checkFail, Message: err.Error()}
	}
	cred, err := llmproxy.FromStoreFor(store, provider, up.Auth)(ctx)
	switch {
	case errors.Is(err, llmproxy.ErrNoCredential):
		return Check{Name: check, Status: checkFail, Message: "no " + provider + " model API credential: agents cannot reach the model",
			Fix: setFix}
	case err != nil:
		return Check{Name: check, Status: checkFail, Message: "unreadable: " + oneLine(err.Error()), Fix: setFix}
	}
	stored := "stored (" + cred.Kind + ")"
	if cred.Kind == llmproxy.KindNone {
		stored = "none needed (" + provider + ", auth none)"
	}
	if !online {
		return Check{Name: check, Status: checkOK, Message: strings.TrimSuffix(stored, ")") + "; carapace doctor --online asks the model API)"}
	}
	if cfg == nil {
		return Check{Name: check, Status: checkWarn, Message: stored + "; not asked online: config.toml does not load"}
	}
	upstream, err := url.Parse(up.Upstream)
	if err != nil {
		return Check{Name: check, Status: checkFail, Message: "upstream: " + err.Error(), Fix: "carapace config edit"}
	}
	t, err := llmproxy.TransportFor(up.CAFile)
	if err != nil {
		return Check{Name: check, Status: checkFail, Message: err.Error(), Fix: "carapace config edit"}
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var have []string
	if provider == llmproxy.ProviderOllama {
		have, err = llmproxy.OllamaModels(pctx, upstream, t, cred)
	} else {
		err = llmproxy.Probe(pctx, upstream, t, cred)
	}
	switch {
	case errors.Is(err, llmproxy.ErrRefused) && provider == llmproxy.ProviderAnthropic:
		return Check{Name: check, Status: checkFail, Message: oneLine(err.Error()) + ": it is revoked, mistyped or of another kind",
			Fix: "carapace auth set --llm anthropic (or --oauth for a Claude subscription's token)"}
	case errors.Is(err, llmproxy.ErrRefused):
		return Check{Name: check, Status: checkFail, Message: oneLine(err.Error()) + ": the key is wrong, or the upstream takes it in another style than auth = " + strconv.Quote(up.Auth),
			Fix: setFix + " (or change auth in config.toml)"}
	case err != nil && provider == llmproxy.ProviderOllama:
		return Check{Name: check, Status: checkWarn, Message: "not checked: " + oneLine(err.Error()), Fix: "start Ollama (ollama serve), or correct the upstream in config.toml"}
	case err != nil:
		return Check{Name: check, Status: checkWarn, Message: stored + ", but not checked: " + oneLine(err.Error())}
	}
	if missing, err := llmproxy.MissingModels(upstream.Host, have, models); err != nil && provider == llmproxy.ProviderOllama {
		fix := make([]string, len(missing))
		for i, m := range missing {
			fix[i] = "ollama pull " + m
		}
		return Check{Name: check, Status: checkFail, Message: oneLine(err.Error()), Fix: strings.Join(fix, " && ")}
	}
	return Check{Name: check, Status: checkOK, Message: stored + " and accepted by " + upstream.Host}
}

// checkPins checks that each user plugin's handler still matches the pin
// taken at install: the core refuses one that does not.
func checkPins(h home.Dir, version string) Check {
	list, err := scanPlugins(h, version)
	if err != nil {
		return Check{Name: "plugin pins", Status: checkFail, Message: oneLine(err.Error())}
	}
	var bad, fix []string
	pinned := 0
	for _, p := range list {
		switch {
		case p.Missing:
			bad = append(bad, p.Name+" (its folder is gone)")
			fix = append(fix, "carapace plugin remove "+p.Name)
		case !p.Valid:
			bad = append(bad, p.Name+" (does not validate: "+strings.Join(p.Problems, "; ")+")")
			fix = append(fix, "carapace plugin validate "+shellQuote(p.Dir))
		case !p.Pinned:
			bad = append(bad, p.Name+" (copied in, never installed: not pinned)")
			fix = append(fix, "carapace plugin remove "+p.Name)
		case !p.PinMatches:
			bad = append(bad, p.Name+" ("+p.PinProblem+"; re-pin it only once you trust the change)")
			if p.Source != "" {
				fix = append(fix, "carapace plugin install --replace "+shellQuote(p.Source))
			} else {
				fix = append(fix, "carapace plugin remove "+p.Name)
			}
		default:
			pinned++
		}
	}
	if len(bad) > 0 {
		return Check{Name: "plugin pins", Status: checkFail, Message: "the core will not start: " + strings.Join(bad, ", "), Fix: strings.Join(fix, " && ")}
	}
	if len(list) == 0 {
		return Check{Name: "plugin pins", Status: checkOK, Message: "no user plugins"}
	}
	return Check{Name: "plugin pins", Status: checkOK, Message: fmt.Sprintf("%d user plugin(s), each matching its pin", pinned)}
}

// checkTelegram checks the Telegram channel, when it is set up: the
// running core's plugin reached the Bot API with the token and hears from
// it (not degraded), and someone owns the bot — owner_id in config.toml,
// or a pairing — or a pairing code waits for its owner.
func (a *app) checkTelegram(ctx context.Context, h home.Dir, st *api.Status) Check {
	c := Check{Name: "telegram"}
	store, err := a.credentials()
	if err != nil {
		c.Status, c.Message = checkFail, err.Error()
		return c
	}
	b, err := store.Get("telegram", telegramTokenKey)
	clear(b)
	if errors.Is(err, keychain.ErrNotFound) {
		c.Status, c.Message = checkOK, "not set up (optional: carapace setup, docs/TELEGRAM.md)"
		return c
	}
	if err != nil {
		c.Status, c.Message, c.Fix = checkFail, "the bot token is unreadable: "+oneLine(err.Error()), "carapace auth set --plugin telegram --key "+telegramTokenKey
		return c
	}
	owner, fromConfig, oerr := telegramOwner(ctx, h)
	pending := pairing.Pending(h.DataDir("telegram"))
	ownerWords := fmt.Sprintf("owned by Telegram user %d (paired)", owner)
	if fromConfig {
		ownerWords = fmt.Sprintf("owned by Telegram user %d (owner_id in config.toml)", owner)
	}
	var p *api.PluginStatus
	if st != nil {
		for i := range st.Plugins {
			if st.Plugins[i].Name == "telegram" {
				p = &st.Plugins[i]
			}
		}
	}
	switch {
	case oerr != nil:
		c.Status, c.Message = checkWarn, "cannot tell who owns the bot: "+oneLine(oerr.Error())
	case owner == 0 && !pending:
		c.Status, c.Message, c.Fix = checkFail, "nobody owns the bot, so it answers no one and the plugin does not start", "carapace telegram pair"
	case st == nil:
		c.Status, c.Message, c.Fix = checkWarn, "bot token stored; whether the Bot API accepts it shows once the core runs", "carapace serve"
		if owner == 0 {
			c.Message += "; a pairing code waits for its owner"
		} else {
			c.Message += "; " + ownerWords
		}
	case p == nil:
		c.Status, c.Message = checkFail, "the running core has no telegram plugin (a build without the bundled plugins?)"
	case p.State == "degraded":
		c.Status, c.Message, c.Fix = checkFail, "degraded: "+p.Problem, "check the network and api_url in [plugins.telegram.config], then carapace plugin restart telegram"
	case p.State == api.PluginRestarting:
		c.Status, c.Message, c.Fix = checkWarn, "restarting after a crash: "+p.Problem+revivalNote(*p, time.Now()), "none needed: the core starts it again; if it goes down, carapace plugin restart telegram"
	case p.State == api.PluginDown:
		c.Status, c.Message, c.Fix = checkFail, "down: "+p.Problem, "carapace plugin restart telegram"
	case !p.Healthy:
		c.Status, c.Message, c.Fix = checkFail, p.State+": "+p.Problem, "carapace plugin restart telegram (after the fix the message names)"
	case owner == 0:
		c.Status, c.Message, c.Fix = checkWarn, "reachable; waiting for the pairing code (it expires after "+pairing.TTL.String()+")", "carapace telegram pair"
	default:
		c.Status, c.Message = checkOK, "reachable; "+ownerWords
	}
	return c
}

// usesEventKit reports whether config.toml has the calendar plugin use
// macOS EventKit (backend = "eventkit"), which needs the app's access.
func usesEventKit(cfg *config.Config) bool {
	if cfg == nil {
		return false
	}
	pc, ok := cfg.Plugins["calendar"]
	if !ok {
		return false
	}
	b, _ := pc.Config["backend"].(string)
	return b == "eventkit"
}

// checkApp checks what the menu-bar app reports of itself: whether it
// may show approvals as notifications, whether it starts at login, and on
// macOS its access to calendars and reminders, which the calendar plugin
// needs when it uses EventKit (eventkit).
func checkApp(h home.Dir, eventkit bool) []Check {
	st, err := appstate.Read(h)
	if errors.Is(err, appstate.ErrNotRunning) {
		out := []Check{{Name: "app", Status: checkOK, Message: "not running (its notification and login-item checks need it; without it, approve with carapace confirm or on Telegram)"}}
		if eventkit {
			out = append(out, Check{Name: "calendar access", Status: checkWarn,
				Message: "the calendar plugin uses EventKit, and only the menu-bar app can tell (or ask) whether Carapace may read your calendars and reminders",
				Fix:     "open the Carapace app, then Carapace menu › Allow calendar and reminders access…"})
		}
		return out
	}
	if err != nil {
		return []Check{{Name: "app", Status: checkWarn, Message: oneLine(err.Error())}}
	}
	out := []Check{{Name: "notifications", Status: checkOK, Message: "approvals show as notifications with Approve and Deny"}}
	if !st.Notifications.OK {
		fix := "allow them in System Settings › Notifications › Carapace"
		if goruntime.GOOS != "darwin" {
			fix = "check that the desktop has a notification service (org.freedesktop.Notifications)"
		}
		out[0] = Check{Name: "notifications", Status: checkWarn, Message: "off: " + st.Notifications.Why + " (approvals wait in the menu)", Fix: fix}
	}
	login := Check{Name: "login item", Status: checkOK, Message: "the app starts at login"}
	switch {
	case !st.LoginItem.Supported:
		login.Message = "not supported here: " + st.LoginItem.Problem
	case st.LoginItem.Problem != "":
		login = Check{Name: "login item", Status: checkWarn, Message: "unreadable: " + st.LoginItem.Problem, Fix: "Carapace menu › Start at Login"}
	case !st.LoginItem.Enabled:
		login = Check{Name: "login item", Status: checkWarn, Message: "the app does not start at login, so after a restart no core runs until you open it",
			Fix: "Carapace menu › Start at Login (or carapace service install)"}
	}
	out = append(out, login)
	if c := checkCalendarAccess(st.Calendar, eventkit); c != nil {
		out = append(out, *c)
	}
	return out
}

// checkCalendarAccess is the app's access to calendars and reminders, as
// it reports it; nil where it has none to ask for (not macOS) and the
// plugin does not need it.
func checkCalendarAccess(c *appstate.Calendar, eventkit bool) *Check {
	const name = "calendar access"
	switch {
	case c == nil && eventkit:
		return &Check{Name: name, Status: checkFail, Message: "the calendar plugin uses EventKit (backend = \"eventkit\"), which is macOS only, and the app here has no calendar access to ask for",
			Fix: "use backend = \"caldav\" in [plugins.calendar.config] (docs/CALENDAR.md)"}
	case c == nil:
		return nil
	case c.Granted:
		return &Check{Name: name, Status: checkOK, Message: "calendars and reminders: full access"}
	}
	detail := "events " + c.Events + ", reminders " + c.Reminders
	if c.Problem != "" {
		detail += " (" + oneLine(c.Problem) + ")"
	}
	fix := c.Advice()
	if !eventkit {
		return &Check{Name: name, Status: checkOK, Message: detail + "; not needed: the calendar plugin does not use EventKit"}
	}
	return &Check{Name: name, Status: checkFail, Message: detail + ": the calendar plugin's tools answer NO_ACCESS", Fix: fix}
}

// checkAudit checks the audit log can be appended to, and its size.
func checkAudit(h home.Dir) Check {
	f, err := os.OpenFile(h.AuditLog(), os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return Check{Name: "audit log", Status: checkOK, Message: "none yet (the core creates it)"}
	}
	if err != nil {
		return Check{Name: "audit log", Status: checkFail, Message: "not writable: " + oneLine(err.Error()) + " (the core refuses every request then)",
			Fix: "chmod 600 " + shellQuote(h.AuditLog())}
	}
	f.Close()
	fi, _ := os.Stat(h.AuditLog())
	return Check{Name: "audit log", Status: checkOK, Message: fmt.Sprintf("%s, %d KiB", h.AuditLog(), fi.Size()/1024)}
}

// checkEngineAndImage checks the container engine config.toml chooses,
// as the core would pick it, and that it has the agent image.
func (a *app) checkEngineAndImage(ctx context.Context, cfg *config.Config) []Check {
	e, fix, err := a.findEngine(ctx, cfg.Runtime.Engine)
	if err != nil {
		status := checkFail
		if cfg.Runtime.Engine == "none" {
			status = checkWarn
		}
		return []Check{{Name: "engine", Status: status, Message: oneLine(err.Error()), Fix: fix}}
	}
	checks := []Check{{Name: "engine", Status: checkOK, Message: e.info.Engine + " " + e.info.Version}}
	image := a.defaultImage(cfg.Runtime.Image)
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ok, err := agentimage.Exists(cctx, e.bin(), image)
	switch {
	case err != nil:
		checks = append(checks, Check{Name: "image", Status: checkFail, Message: oneLine(err.Error())})
	case !ok:
		checks = append(checks, Check{Name: "image", Status: checkFail, Message: "the agent image " + image + " is missing: agents cannot start",
			Fix: imageFix})
	default:
		checks = append(checks, Check{Name: "image", Status: checkOK, Message: image})
	}
	return checks
}

// checkTasks warns of enabled tasks whose next fire is overdue.
func (a *app) checkTasks(ctx context.Context) Check {
	c, _, err := a.client()
	if err != nil {
		return Check{Name: "tasks", Status: checkFail, Message: err.Error()}
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ts, err := c.Tasks(cctx)
	if err != nil {
		return Check{Name: "tasks", Status: checkWarn, Message: "the core did not list its tasks: " + oneLine(err.Error())}
	}
	var late []string
	for _, t := range ts {
		if t.Enabled && t.Next != nil && time.Since(*t.Next) > time.Minute {
			late = append(late, t.ID)
		}
	}
	if len(late) > 0 {
		return Check{Name: "tasks", Status: checkWarn, Message: "overdue: " + strings.Join(late, ", ") + " (the scheduler is stuck?)", Fix: "carapace stop && carapace serve"}
	}
	return Check{Name: "tasks", Status: checkOK, Message: fmt.Sprintf("%d scheduled", len(ts))}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>*?()[]{}~#!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkMail checks the mail plugin's accounts (docs/MAIL.md): each has its
// password stored. Whether the servers accept it is the running plugin's
// own check (doctor --online: plugin mail).
func (a *app) checkMail(cfg *config.Config) Check {
	c := Check{Name: "mail"}
	if cfg == nil {
		c.Status, c.Message = checkWarn, "config.toml cannot be read (see config)"
		return c
	}
	pc, ok := cfg.Plugins["mail"]
	if !ok {
		c.Status, c.Message = checkOK, "not set up (optional: docs/MAIL.md)"
		return c
	}
	names, err := mail.AccountNames(pc.Config)
	if err != nil {
		c.Status, c.Message, c.Fix = checkFail, "[plugins.mail.config]: "+oneLine(err.Error()), "edit [plugins.mail.config] in config.toml (docs/MAIL.md), then carapace plugin restart mail"
		return c
	}
	if len(names) == 0 {
		c.Status, c.Message = checkWarn, "no account in [plugins.mail.config] (docs/MAIL.md)"
		return c
	}
	store, err := a.credentials()
	if err != nil {
		c.Status, c.Message = checkFail, err.Error()
		return c
	}
	for _, n := range names {
		b, err := store.Get("mail", n)
		clear(b)
		if err != nil {
			c.Status, c.Message, c.Fix = checkFail, fmt.Sprintf("account %s has no password stored", n), "carapace auth set --plugin mail --key "+n
			return c
		}
	}
	// The logins are the running plugin's own check (plugin mail, with
	// --online), made from its process through its confinement.
	c.Status, c.Message = checkOK, fmt.Sprintf("%d account(s), passwords stored: %s (with --online the plugin logs in: plugin mail)", len(names), strings.Join(names, ", "))
	return c
}
