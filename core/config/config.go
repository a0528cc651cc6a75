// Package config loads $CARAPACE_HOME/config.toml. Every key is checked: an
// unknown key is an error, not a silently ignored setting, because a typo in
// a security setting must not fall back to a default unnoticed.
package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/netclass"
)

// Config is the core's configuration. The zero value of every field means
// "use the default".
type Config struct {
	Core      Core              `toml:"core"`
	Confirm   Confirm           `toml:"confirm"`
	RateLimit RateLimit         `toml:"rate_limit"`
	Audit     Audit             `toml:"audit"`
	Plugins   map[string]Plugin `toml:"plugins"`
	Runtime   Runtime           `toml:"runtime"`
	Sessions  Sessions          `toml:"sessions"`
	LLM       LLM               `toml:"llm"`
	Tasks     Tasks             `toml:"tasks"`
	Network   Network           `toml:"network"`
	// Groups are the groups the core starts agent sessions for when an
	// event names them ([groups.NAME]); events of other groups are logged
	// and dropped.
	Groups map[string]Group `toml:"groups"`
	// Digest identifies the file Load read (Digest of its bytes), so that
	// a running core's configuration can be told from the file's.
	Digest string `toml:"-"`
}

// Digest is the SHA-256 of a config.toml's bytes, in hex; an absent file
// is the empty one.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// LLM configures the proxy through which agents reach the model API. Its
// provider, upstream, auth and ca_file are the default upstream, which
// every group uses unless it names one of Upstreams.
type LLM struct {
	// Provider is the kind of upstream: "anthropic" (the default),
	// "ollama", "llamacpp" or "custom" (llmproxy.Providers).
	Provider string `toml:"provider"`
	// Upstream is the model API's origin; default the provider's
	// (https://api.anthropic.com, http://127.0.0.1:11434 for ollama,
	// http://127.0.0.1:8080 for llamacpp; custom has none and needs one).
	// https, or plain http to a loopback address only; no path: requests
	// keep theirs (/v1/messages…).
	Upstream string `toml:"upstream"`
	// Auth is how the credential is sent: "x-api-key", "bearer" or "none"
	// (llmproxy.AuthStyles). Default: none for ollama and llamacpp; for
	// anthropic it follows the stored credential and may not be set;
	// custom must say.
	Auth string `toml:"auth"`
	// CAFile, if set, is a PEM file of certificates to trust for the
	// upstream instead of the system's (a gateway with a private CA, tests).
	CAFile string `toml:"ca_file"`
	// Model is the model Claude Code asks this upstream for in the groups
	// that name none (a group's model wins); default Claude Code's own,
	// which only Anthropic's API serves.
	Model string `toml:"model"`
	// Upstreams are more upstreams, by a name a group's upstream gives
	// ([llm.upstreams.NAME]), with the same five keys.
	Upstreams map[string]LLMUpstream `toml:"upstreams"`
	// RequestsPerMinute bounds each session's model requests; default 60.
	RequestsPerMinute int `toml:"requests_per_minute"`
	// DailyTokens bounds each group's input and output tokens per day
	// (local time); 0, the default, is no limit.
	DailyTokens int64 `toml:"daily_tokens"`
	// Port is where `ipc-relay` listens inside the container; default 8377.
	Port int `toml:"port"`
}

// Network holds the settings of the machine's network that every plugin's
// egress point (core/egress) obeys.
type Network struct {
	// FakeIP are the prefixes a fake-IP DNS (Clash, Surge, sing-box)
	// answers from, each inside 198.18.0.0/15 or fc00::/7: an address in
	// one is reached when it came from resolving a name (never when a
	// plugin names it literally), by plugins that reach public addresses
	// and for declared host names alike. Empty, the default: those ranges
	// are refused like every special address.
	FakeIP []string `toml:"fake_ip"`
}

// FakeIPPrefixes returns FakeIP parsed; Load refused a config whose
// prefixes do not parse, so none is left out but in a Config made by hand.
func (n Network) FakeIPPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range n.FakeIP {
		if p, err := netclass.FakeIPPrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// LLMUpstream is one named upstream ([llm.upstreams.NAME]); its keys mean
// what [llm]'s do.
type LLMUpstream struct {
	Provider string `toml:"provider"`
	Upstream string `toml:"upstream"`
	Auth     string `toml:"auth"`
	CAFile   string `toml:"ca_file"`
	Model    string `toml:"model"`
}

// DefaultUpstream returns [llm]'s own upstream as an LLMUpstream.
func (l *LLM) DefaultUpstream() LLMUpstream {
	return LLMUpstream{Provider: l.Provider, Upstream: l.Upstream, Auth: l.Auth, CAFile: l.CAFile, Model: l.Model}
}

// ModelsFor returns the model group's sessions ask for (its model, else
// its upstream's) and its small, fast one (its small_fast_model, else
// that model); "" leaves the choice to Claude Code.
func (c *Config) ModelsFor(group string) (model, small string) {
	_, u := c.UpstreamFor(group)
	g := c.Groups[group]
	model = cmp.Or(g.Model, u.Model)
	return model, cmp.Or(g.SmallFastModel, model)
}

// UpstreamFor returns the name and the upstream group's sessions use: the
// one its upstream names, or [llm]'s (name ""). A group not in
// [groups] uses [llm]'s.
func (c *Config) UpstreamFor(group string) (string, LLMUpstream) {
	if g, ok := c.Groups[group]; ok && g.Upstream != "" {
		if u, ok := c.LLM.Upstreams[g.Upstream]; ok {
			return g.Upstream, u
		}
	}
	return "", c.LLM.DefaultUpstream()
}

// Tasks configures the scheduler of scheduled tasks.
type Tasks struct {
	// MaxFailures is how many failed runs in a row pause a task; default 3.
	MaxFailures int `toml:"max_failures"`
}

// SpawnTopics are the event topics that start an agent session by default
// (and the only ones that may): the plugin SDK's, whose payloads carry a
// prompt.
var SpawnTopics = []string{plugin.TopicMessageInbound.Name(), plugin.TopicTaskTriggered.Name()}

// Group is one group the core runs agents for on events.
type Group struct {
	// Topics are the event topics that start a session for the group;
	// default SpawnTopics. The event's payload's text is the prompt.
	Topics []string `toml:"topics"`
	// Upstream names the [llm.upstreams.NAME] the group's sessions use;
	// default [llm]'s own.
	Upstream string `toml:"upstream"`
	// Models, when set, are the only model names the group's agents may
	// ask for; the proxy refuses any other. Default: any.
	Models []string `toml:"models"`
	// Model is the model Claude Code uses (ANTHROPIC_MODEL); default
	// Claude Code's own. It must be one of Models when those are set.
	Model string `toml:"model"`
	// SmallFastModel is the model Claude Code uses for its background
	// work (ANTHROPIC_DEFAULT_HAIKU_MODEL); default Model when that is
	// set, else Claude Code's own. It must be one of Models when those
	// are set.
	SmallFastModel string `toml:"small_fast_model"`
}

// Engines are the values of runtime.engine.
var Engines = []string{"auto", "docker", "podman", "apple", "none"}

// Runtime chooses where agent sessions run.
type Runtime struct {
	// Engine is "auto" (the default: Apple container on macOS when it is
	// installed and recent enough, otherwise Docker, then Podman; never
	// "none"), "docker", "podman", "apple", or "none" (the agent runs as a
	// local process without isolation: plugin development only).
	Engine string `toml:"engine"`
	// Image is the agent image; default carapace-agent:<version>.
	Image    string  `toml:"image"`
	CPUs     float64 `toml:"cpus"`      // default 2
	MemoryMB int     `toml:"memory_mb"` // default 4096
	Pids     int     `toml:"pids"`      // default 256 (engines that have a pids limit)
}

// Sessions bounds agent sessions run by the core.
type Sessions struct {
	MaxPerGroup int      `toml:"max_per_group"` // concurrent sessions per group, default 3
	Queue       int      `toml:"queue"`         // sessions waiting per group, default 16
	IdleTimeout Duration `toml:"idle_timeout"`  // a session with no request for this long is stopped; default 30m
	// ConnectTimeout bounds how long a session's container may run before
	// its agent first reaches the core (a connection to its socket, or a
	// model API request); past it the container is stopped. Default 5m,
	// time enough for an engine to fetch the image on first use. On Apple
	// container a relay that failed once never connects again
	// (apple/containerization #867), and the agent would hang.
	ConnectTimeout Duration `toml:"connect_timeout"`
	// Warm is how many containers the core keeps started ahead, per group
	// that receives events ([groups.NAME] topics), waiting for the group's
	// next session; default 1, 0 turns warm containers off. Each holds one
	// of the group's max_per_group slots. Read it with WarmPerGroup.
	Warm *int `toml:"warm,omitempty"`
	// WarmIdle is how long a warm container waits for a session before it
	// is stopped (and none is started again until the group's next
	// session); default 30m.
	WarmIdle Duration `toml:"warm_idle"`
}

// WarmPerGroup is [sessions] warm: 1 when it is not set.
func (s Sessions) WarmPerGroup() int {
	if s.Warm == nil {
		return 1
	}
	return *s.Warm
}

// Core holds the pipeline's timeouts and bounds.
type Core struct {
	HandlerTimeout  Duration `toml:"handler_timeout"`  // default 30s
	ShutdownTimeout Duration `toml:"shutdown_timeout"` // default 10s
	MaxSessions     int      `toml:"max_sessions"`     // default 64
	// MovedConfirmationTimeout is [core] confirmation_timeout, which moved
	// to [confirm] timeout: refused with a message that says so.
	MovedConfirmationTimeout Duration `toml:"confirmation_timeout,omitempty"` // never written back (Effective)
}

// Confirm configures the confirmations high-risk tools wait on.
type Confirm struct {
	// Timeout is how long a call waits for the user; past it the call is
	// refused (CONFIRMATION_TIMEOUT). Default 5m.
	Timeout Duration `toml:"timeout"`
	// MaxPending bounds the confirmations waiting at once per group; a
	// call past it is denied at once, not queued. Default 8.
	MaxPending int `toml:"max_pending"`
}

// RateLimit is the per-session, per-tool request rate.
type RateLimit struct {
	PerMinute int             `toml:"per_minute"` // default 60
	Burst     int             `toml:"burst"`      // default per_minute
	Tools     map[string]Rate `toml:"tools"`      // per-tool overrides
}

// Rate is one tool's rate.
type Rate struct {
	PerMinute int `toml:"per_minute"`
	Burst     int `toml:"burst"`
}

// Audit configures the audit log's rotation.
type Audit struct {
	MaxSizeMB int `toml:"max_size_mb"` // default 10
	MaxFiles  int `toml:"max_files"`   // default 5
	// RejectionsPerMinute bounds the rejected requests per session that are
	// audited one by one; past it one a second is, with a count of the
	// rest. Default 600 (bursts of a sixth of it).
	RejectionsPerMinute int `toml:"rejections_per_minute"`
}

// Plugin is the user's settings for one plugin.
type Plugin struct {
	// AllowedGroups, when set, replaces the manifest's allowed_groups: the
	// user decides which of their groups may use an installed plugin.
	AllowedGroups []string `toml:"allowed_groups"`
	// Config is the plugin's own configuration ([plugins.NAME.config]),
	// validated at load against the manifest's config_schema and passed to
	// the handler's Init.
	Config map[string]any `toml:"config"`
	// Surface grants the surface capability the plugin's manifest asks for
	// (manifest.CapabilitySurface): confirmations to show and decide, the
	// core's status, pause and resume, stopping its own sessions.
	Surface bool `toml:"surface"`
	// Unconfined runs the plugin's handler without the operating system's
	// confinement (Landlock and seccomp on Linux, Seatbelt on macOS): it
	// can then read every file of the user's, reach the core's sockets and
	// any host. The user accepts that risk for this plugin by name; without
	// it, a kernel that cannot confine makes the plugin fail to start.
	Unconfined bool `toml:"unconfined"`
}

// Duration is a time.Duration written as "30s" or "5m".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: use a number with a unit, like \"30s\" or \"5m\"", b)
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", b)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Load reads path. A missing file is the default configuration. A file
// with problems is refused with every one of them (Validate's), each with
// its line.
func Load(path string) (*Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Digest = Digest(nil)
		return c.withDefaults(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	probs, err := validateData(data)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	if len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.String()
		}
		return nil, fmt.Errorf("load config %s: %s", path, strings.Join(msgs, "; "))
	}
	if _, err := toml.Decode(string(data), &c); err != nil {
		// validateData decoded every key already; this is a bug if it happens.
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	c.Digest = Digest(data)
	return c.withDefaults(), nil
}

// problems returns every value in c the core refuses, each with its key.
// c holds what the file sets, before the defaults: a zero value is "not
// set".
func (c *Config) problems() []keyProblem {
	var out []keyProblem
	add := func(key string, format string, a ...any) {
		out = append(out, keyProblem{key: toml.Key(strings.Split(key, ".")), msg: fmt.Sprintf(format, a...)})
	}
	// addAt is add for a key with a name the user chose, which may hold a
	// dot.
	addAt := func(k toml.Key, format string, a ...any) {
		out = append(out, keyProblem{key: k, msg: fmt.Sprintf(format, a...)})
	}
	notNegative := func(key string, v float64) {
		if v < 0 {
			add(key, "%s must not be negative", key)
		}
	}
	notNegative("rate_limit.per_minute", float64(c.RateLimit.PerMinute))
	notNegative("rate_limit.burst", float64(c.RateLimit.Burst))
	for _, name := range slices.Sorted(maps.Keys(c.RateLimit.Tools)) {
		r := c.RateLimit.Tools[name]
		if r.PerMinute <= 0 {
			addAt(toml.Key{"rate_limit", "tools", name, "per_minute"}, "rate_limit.tools.%s.per_minute must be positive", name)
		}
		if r.Burst < 0 {
			addAt(toml.Key{"rate_limit", "tools", name, "burst"}, "rate_limit.tools.%s.burst must not be negative", name)
		}
	}
	if d := c.Core.MovedConfirmationTimeout.Duration; d != 0 {
		add("core.confirmation_timeout", "core.confirmation_timeout has moved: write [confirm] timeout = %q instead", d)
	}
	notNegative("confirm.max_pending", float64(c.Confirm.MaxPending))
	notNegative("core.max_sessions", float64(c.Core.MaxSessions))
	notNegative("audit.max_size_mb", float64(c.Audit.MaxSizeMB))
	notNegative("audit.max_files", float64(c.Audit.MaxFiles))
	notNegative("audit.rejections_per_minute", float64(c.Audit.RejectionsPerMinute))
	if c.Runtime.Engine != "" && !slices.Contains(Engines, c.Runtime.Engine) {
		add("runtime.engine", "runtime.engine %q: use one of %s", c.Runtime.Engine, strings.Join(Engines, ", "))
	}
	for _, s := range c.Network.FakeIP {
		if _, err := netclass.FakeIPPrefix(s); err != nil {
			add("network.fake_ip", "network.fake_ip: %v", err)
		}
	}
	if c.Tasks.MaxFailures < 0 {
		add("tasks.max_failures", "tasks.max_failures must not be negative (0 is the default, 3)")
	}
	notNegative("runtime.cpus", c.Runtime.CPUs)
	notNegative("runtime.pids", float64(c.Runtime.Pids))
	notNegative("sessions.max_per_group", float64(c.Sessions.MaxPerGroup))
	notNegative("sessions.queue", float64(c.Sessions.Queue))
	if w := c.Sessions.Warm; w != nil && (*w < 0 || *w > max(c.Sessions.MaxPerGroup, 3)) {
		add("sessions.warm", "sessions.warm = %d: from 0 (no warm containers) to sessions.max_per_group (each warm container holds one of the group's slots)", *w)
	}
	if c.Runtime.MemoryMB != 0 && c.Runtime.MemoryMB < 64 {
		add("runtime.memory_mb", "runtime.memory_mb: at least 64")
	}
	if strings.HasPrefix(c.Runtime.Image, "-") || strings.ContainsAny(c.Runtime.Image, " \t\n") {
		add("runtime.image", "runtime.image %q is not an image reference", c.Runtime.Image)
	}
	out = append(out, checkUpstream(toml.Key{"llm"}, c.LLM.DefaultUpstream())...)
	for _, name := range slices.Sorted(maps.Keys(c.LLM.Upstreams)) {
		if !groupRE.MatchString(name) {
			addAt(toml.Key{"llm", "upstreams", name}, "llm.upstreams.%s: not an upstream name (1-64 characters of a-z, A-Z, 0-9, _ and -)", name)
		}
		out = append(out, checkUpstream(toml.Key{"llm", "upstreams", name}, c.LLM.Upstreams[name])...)
	}
	notNegative("llm.requests_per_minute", float64(c.LLM.RequestsPerMinute))
	notNegative("llm.daily_tokens", float64(c.LLM.DailyTokens))
	notNegative("llm.port", float64(c.LLM.Port))
	if c.LLM.Port > 65535 {
		add("llm.port", "llm.port must be at most 65535")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Groups)) {
		if !groupRE.MatchString(name) {
			addAt(toml.Key{"groups", name}, "groups.%s: not a group name (1-64 characters of a-z, A-Z, 0-9, _ and -)", name)
		}
		g := c.Groups[name]
		for _, t := range g.Topics {
			if !slices.Contains(SpawnTopics, t) {
				addAt(toml.Key{"groups", name, "topics"}, "groups.%s.topics: %q does not start sessions; use %s", name, t, strings.Join(SpawnTopics, " or "))
			}
		}
		out = append(out, checkGroupModels(name, g, c.LLM)...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		p := c.Plugins[name]
		k := toml.Key{"plugins", name, "allowed_groups"}
		// An empty list reads like "no group" but would mean "every
		// group" (no restriction): refuse the ambiguity.
		if p.AllowedGroups != nil && len(p.AllowedGroups) == 0 {
			addAt(k, "plugins.%s.allowed_groups is empty; list the groups that may use %s, or remove the plugin (carapace plugin remove %s) to allow none", name, name, name)
		}
		for _, g := range p.AllowedGroups {
			if !groupRE.MatchString(g) {
				addAt(k, "plugins.%s.allowed_groups: %q is not a group name (1-64 characters of a-z, A-Z, 0-9, _ and -)", name, g)
			}
		}
	}
	return out
}

var groupRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// orDefault sets *p to v if *p is its type's zero value (not set in the
// file).
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func (c *Config) withDefaults() *Config {
	orDefault(&c.Core.HandlerTimeout, Duration{30 * time.Second})
	orDefault(&c.Confirm.Timeout, Duration{5 * time.Minute})
	orDefault(&c.Confirm.MaxPending, 8)
	orDefault(&c.Core.ShutdownTimeout, Duration{10 * time.Second})
	orDefault(&c.Core.MaxSessions, 64)
	orDefault(&c.RateLimit.PerMinute, 60)
	orDefault(&c.RateLimit.Burst, c.RateLimit.PerMinute)
	orDefault(&c.Audit.MaxSizeMB, 10)
	orDefault(&c.Audit.MaxFiles, 5)
	orDefault(&c.Audit.RejectionsPerMinute, 600)
	orDefault(&c.Runtime.Engine, "auto")
	orDefault(&c.Runtime.CPUs, 2)
	orDefault(&c.Runtime.MemoryMB, 4096)
	orDefault(&c.Runtime.Pids, 256)
	orDefault(&c.Sessions.MaxPerGroup, 3)
	orDefault(&c.Tasks.MaxFailures, 3)
	orDefault(&c.Sessions.Queue, 16)
	orDefault(&c.Sessions.IdleTimeout, Duration{30 * time.Minute})
	orDefault(&c.Sessions.ConnectTimeout, Duration{5 * time.Minute})
	orDefault(&c.Sessions.WarmIdle, Duration{30 * time.Minute})
	if c.Sessions.Warm == nil {
		one := 1
		c.Sessions.Warm = &one
	}
	c.LLM.Provider, c.LLM.Upstream, c.LLM.Auth = upstreamDefaults(c.LLM.Provider, c.LLM.Upstream, c.LLM.Auth)
	for name, u := range c.LLM.Upstreams {
		u.Provider, u.Upstream, u.Auth = upstreamDefaults(u.Provider, u.Upstream, u.Auth)
		c.LLM.Upstreams[name] = u
	}
	orDefault(&c.LLM.RequestsPerMinute, 60)
	orDefault(&c.LLM.Port, 8377)
	if len(c.Network.FakeIP) == 0 {
		c.Network.FakeIP = nil // fake_ip = [] is the default, none
	}
	for name, g := range c.Groups {
		if len(g.Topics) == 0 {
			g.Topics = SpawnTopics
			c.Groups[name] = g
		}
	}
	return c
}

// RateFor returns the rate of a tool: its override, or the default.
func (c *Config) RateFor(tool string) Rate {
	if r, ok := c.RateLimit.Tools[tool]; ok {
		if r.Burst == 0 {
			r.Burst = r.PerMinute
		}
		return r
	}
	return Rate{PerMinute: c.RateLimit.PerMinute, Burst: c.RateLimit.Burst}
}
