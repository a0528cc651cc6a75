// Package boxprobe is what runs inside the agent's container when the
// core proves its promises (`carapace doctor --prove`, core/prove): the
// static program cmd/carapace-probe, mounted read-only into a container
// built as every session's, runs Run on the Plan the core gives it and
// prints what it observed, one line each. It judges nothing: the core
// does, from these observations and what it counted on its side.
//
// It must stay small and static (no cgo, no net/http): it is built for
// linux/amd64 and linux/arm64 beside the static ipc.
package boxprobe

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Plan is what the core asks the probe to try. It travels as the
// program's one argument: it holds no secret (the canary is fake).
type Plan struct {
	// Nonce names the files the probe writes and the request it sends
	// through the relay, so that the core can tell them from anything else.
	Nonce string `json:"nonce"`
	// RelayPath is the path of the HTTP request sent through the model
	// API's relay on 127.0.0.1:$CARAPACE_LLM_PORT; the core's proxy
	// answers it without forwarding it (a path it does not allow).
	RelayPath string `json:"relay_path"`
	// PublicTCP and PublicUDP are addresses out in the world.
	PublicTCP []string `json:"public_tcp,omitempty"`
	PublicUDP []string `json:"public_udp,omitempty"`
	// HostTCP and HostUDP are the host's own addresses, the engine's
	// bridge among them, where the core listens during the proof.
	HostTCP []string `json:"host_tcp,omitempty"`
	HostUDP []string `json:"host_udp,omitempty"`
	// Names are resolved with the container's own resolver.
	Names []string `json:"names,omitempty"`
	// ModelTCP are the model API's host and its addresses, dialled
	// directly.
	ModelTCP []string `json:"model_tcp,omitempty"`
	// Writable folders must take a file; ReadOnly ones must not.
	Writable []string `json:"writable,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	// KeyPrefix is what a model key starts with; the probe looks for it
	// in its environment and in every file under its mounts.
	KeyPrefix string `json:"key_prefix"`
	// ScanRoots are the folders the scan reads; empty means every mount
	// of the container (what the core asks: the tests give folders of
	// their own).
	ScanRoots []string `json:"scan_roots,omitempty"`
	// ScanMax bounds the bytes the scan reads; 0 means DefaultScanMax.
	ScanMax int64 `json:"scan_max,omitempty"`
}

// DefaultScanMax bounds the key scan's reading.
const DefaultScanMax = 256 << 20

// The probes, as Observation.Probe names them.
const (
	ProbeRelay       = "relay"        // an HTTP request through the relay: Value is the status line
	ProbeLoopbackTCP = "loopback-tcp" // TCP to its own listener on 127.0.0.1 (a control)
	ProbeLoopbackDNS = "loopback-dns" // a DNS query to its own listener on 127.0.0.1 (a control)
	ProbeTCP         = "tcp"          // a TCP connection to Target
	ProbeUDP         = "udp"          // a datagram to Target
	ProbeResolve     = "resolve"      // Target resolved by the container's resolver
	ProbeWrite       = "write"        // a file created in the folder Target
	ProbeStatus      = "status"       // /proc/self/status: Value holds uid, gid and the capability sets
	ProbeChownOther  = "chown-other"  // a file given to another uid (needs CAP_CHOWN)
	ProbeChownSelf   = "chown-self"   // the same file given to its own uid (a control)
	ProbeKey         = "key"          // a key-shaped string at Target; Value is its SHA-256
	ProbeScan        = "scan"         // what the scan read: Value says how much, Error if it stopped short
)

// Observation is what one probe found.
type Observation struct {
	Probe  string `json:"probe"`
	Target string `json:"target,omitempty"`
	OK     bool   `json:"ok"` // it worked
	Error  string `json:"error,omitempty"`
	Value  string `json:"value,omitempty"`
}

// LinePrefix starts every line the probe prints, so that the core reads
// its lines and nothing else an image's entrypoint may print.
const LinePrefix = "carapace-probe: "

// Line is o as the probe prints it.
func (o Observation) Line() string {
	b, _ := json.Marshal(o)
	return LinePrefix + string(b)
}

// Parse reads the observations out of the probe's output, skipping every
// line that is not one.
func Parse(out string) ([]Observation, error) {
	var obs []Observation
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), LinePrefix)
		if !ok {
			continue
		}
		var o Observation
		if err := json.Unmarshal([]byte(rest), &o); err != nil {
			return obs, fmt.Errorf("a probe line that is not an observation: %.80q: %w", rest, err)
		}
		obs = append(obs, o)
	}
	return obs, nil
}
