package api

import "time"

// Status is the state of a running core.
type Status struct {
	Version              string         `json:"version"`               // the core's version
	PID                  int            `json:"pid"`                   // the core's process id
	Started              time.Time      `json:"started"`               // when the core started
	Home                 string         `json:"home"`                  // the core's $CARAPACE_HOME
	Sessions             int            `json:"sessions"`              // live sessions
	PendingConfirmations int            `json:"pending_confirmations"` // tool calls waiting for the user
	Tools                int            `json:"tools"`                 // tools in the catalogue
	Plugins              []PluginStatus `json:"plugins"`               // every plugin, healthy or not
	Draining             bool           `json:"draining"`              // stopping: no new sessions, in-flight calls finishing
	// Paused says no session starts for events (channels' messages,
	// scheduled tasks) until resumed; sessions opened through the control
	// API still start, and running ones go on.
	Paused bool `json:"paused"`
	// Engines are the container engines the core has checked and found
	// ready, by name; empty until the first container session (or the
	// start-up clean-up) needs one.
	Engines []EngineStatus `json:"engines,omitempty"`
	// ConfigDigest identifies the config.toml the core started with
	// (config.Digest): the core reads it only at start, so a file that no
	// longer has this digest is not yet in effect.
	ConfigDigest string `json:"config_digest,omitempty"`
	// Warm are the containers started ahead of their group's next session
	// ([sessions] warm), not yet claimed: they are not sessions.
	Warm []WarmContainer `json:"warm,omitempty"`
}

// WarmContainer is a container started ahead of a session of its group,
// waiting for its first prompt.
type WarmContainer struct {
	Group     string    `json:"group"`     // the only group it can serve
	Container string    `json:"container"` // the container's name
	Engine    string    `json:"engine"`
	Image     string    `json:"image"`
	Started   time.Time `json:"started"`
}

// EngineStatus is a container engine the core uses.
type EngineStatus struct {
	Name    string `json:"name"`    // "apple", "docker", "podman"
	Version string `json:"version"` // the engine's version
	// Bin is the engine's CLI, and BinFrom how the core found it: "PATH",
	// or where an installer puts it when PATH does not have it (a login
	// item's PATH is minimal), e.g. "Homebrew, not on PATH".
	Bin     string `json:"bin,omitempty"`
	BinFrom string `json:"bin_from,omitempty"`
}

// The states of PluginStatus.State that surfaces act on: a plugin the
// core starts again after a wait, and one it has given up on.
const (
	PluginRestarting = "restarting"
	PluginDown       = "down"
)

// PluginStatus is the health of one plugin.
type PluginStatus struct {
	Name string `json:"name"` // the plugin's name
	// Healthy says the plugin initialised and does all its work; false
	// for a degraded one too, which serves its calls all the same.
	Healthy bool `json:"healthy"`
	// Category says why a plugin that did not initialise or crashed
	// failed: NETWORK_ERROR, AUTH_ERROR, CONFIG_ERROR or INTERNAL_ERROR.
	// Empty when healthy or degraded.
	Category string `json:"category,omitempty"`
	// State is "healthy"; "degraded" (it serves its calls, but reports
	// that it cannot do all its work — a channel that cannot receive
	// messages — with why in Problem, until it reports healthy again);
	// "failed" (did not initialise); "restarting" (its process died or
	// hung, or did not start again, and the core starts it again at
	// NextTry); "down" (it crashed too often in a short time: it stays
	// down until `carapace plugin restart NAME`, and Problem says so);
	// "crashed" (its process died while the core was stopping), "stopping"
	// or "removed". Calls to a restarting, down or crashed plugin get
	// PLUGIN_UNAVAILABLE.
	State   string   `json:"state,omitempty"`
	Source  string   `json:"source,omitempty"`  // "builtin" or "user"
	Dir     string   `json:"dir,omitempty"`     // the plugin's folder, for user plugins
	Version string   `json:"version,omitempty"` // the manifest's version
	Tools   []string `json:"tools,omitempty"`   // the tools it provides, when healthy
	PID     int      `json:"pid,omitempty"`     // the handler process, for out-of-process plugins
	Problem string   `json:"problem,omitempty"` // why it failed or is degraded, for the user (never sent to the agent)
	// Restarts counts the times the core has started the plugin again on
	// its own after a crash or hang, since the core started or the last
	// `carapace plugin restart`.
	Restarts int `json:"restarts,omitempty"`
	// NextTry is when a restarting plugin is started again; zero
	// otherwise.
	NextTry time.Time `json:"next_try,omitzero"`
	// Confinement is what an out-of-process plugin's handler may reach and
	// how that is imposed; nil for a plugin that runs in the core.
	Confinement *Confinement `json:"confinement,omitempty"`
}

// PluginCheck is what a running plugin's own check of its setup found
// (plugin.Verifier: it logs in, lists what it reaches, changes nothing),
// asked for by carapace doctor --online through POST
// /v1/plugins/{name}/verify.
type PluginCheck struct {
	Name string `json:"name"` // the plugin's name
	// Checked is false when the plugin has no check of its own (its
	// handler does not implement Verify): OK, Message and Fix are empty.
	Checked bool `json:"checked"`
	OK      bool `json:"ok"`
	// Message is the plugin's own words (one line, at most
	// MaxPluginCheckText bytes), or why the check could not run (it
	// failed or did not answer in time). The plugin's, so shown to the
	// user only, never to the agent.
	Message string `json:"message,omitempty"`
	// Fix is the plugin's own fix when not OK, e.g. "carapace auth set
	// --plugin calendar --key caldav_password".
	Fix string `json:"fix,omitempty"`
}

// MaxPluginCheckText bounds PluginCheck's Message and Fix: the core cuts a
// plugin's longer text.
const MaxPluginCheckText = 600

// Confinement modes.
const (
	ConfinementConfined   = "confined"   // the operating system imposes the policy
	ConfinementUnconfined = "unconfined" // the user set [plugins.NAME] unconfined = true
)

// Confinement is the policy of an out-of-process plugin's handler.
type Confinement struct {
	Mode      string   `json:"mode"`                // ConfinementConfined or ConfinementUnconfined
	Mechanism string   `json:"mechanism,omitempty"` // what imposes it here, e.g. "landlock ABI 7, seccomp"
	Read      []string `json:"read,omitempty"`      // folders it reads ("path (why)")
	Write     []string `json:"write,omitempty"`     // folders it reads and writes
	Hosts     []string `json:"hosts,omitempty"`     // "host:port (where declared)"; none: no network
	Public    bool     `json:"public,omitempty"`    // any public address
}
