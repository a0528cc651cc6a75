// Package pluginpolicy says what one out-of-process plugin may reach: the
// folders it reads and writes, the hosts it may connect to, and whether the
// user accepted running it unconfined. It is computed from the plugin's
// manifest (what it declares), its section of config.toml (what the user
// grants) and the Carapace home (where its folders are), by the same code
// for the core, which imposes it (core/confine, core/egress), and for
// `carapace plugin show`, which prints it.
//
// Nothing is granted by default beyond the plugin's own folder (read), its
// data folder (read and write; its temp folder is inside) and what the
// confinement adds for any program (core/confine). A folder the manifest
// asks for is granted only when the user sets the config key it names, and
// never one that holds or lies inside the Carapace home. A host is reachable
// only when declared, in the manifest or through a config key the manifest
// names.
package pluginpolicy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/manifest"
)

// Path is a folder of the policy and why it is there.
type Path struct {
	Path string // absolute, cleaned
	Why  string // for people: "its folder", "config notes_dir: …"
}

// Host is a host the plugin may connect to, and where it was declared.
type Host struct {
	Name string // a DNS name (lower case) or an IP address, without brackets
	Port uint16
	From string // "manifest" or "config api_url"
}

// String formats the host as host:port.
func (h Host) String() string {
	if strings.Contains(h.Name, ":") {
		return "[" + h.Name + "]:" + strconv.Itoa(int(h.Port))
	}
	return h.Name + ":" + strconv.Itoa(int(h.Port))
}

// Policy is what one plugin's handler may reach.
type Policy struct {
	Plugin string
	Exec   string // the handler executable
	Read   []Path // read (and execute)
	Write  []Path // read and write
	Hosts  []Host
	// Public: any public address, every special range refused.
	Public bool
	// Unconfined: the user set [plugins.NAME] unconfined = true; nothing
	// of the above is imposed by the operating system.
	Unconfined bool
	// Env is what the handler's environment gets beyond the core's
	// minimal one: the certificates to trust (TrustEnv), "NAME=value".
	Env []string
}

// TrustEnv are the variables of the core's environment that name the TLS
// certificates to trust: OpenSSL's convention, which Go's crypto/x509
// (and so every Go handler) reads in place of the system's roots. A
// plugin that may reach the network gets them, with the paths they name
// readable under its confinement: a company CA, a self-signed SearXNG or
// a TLS-inspecting proxy is trusted by setting them where the core runs,
// as for any other program. SSL_CERT_DIR may list several folders, ":"
// between them.
var TrustEnv = []string{"SSL_CERT_FILE", "SSL_CERT_DIR"}

// trust returns the environment and the read grants of TrustEnv as getenv
// has them. Each path must be absolute, exist, and neither hold nor lie in
// the Carapace home; an error names the variable and the fix.
func trust(h home.Dir, getenv func(string) string) ([]string, []Path, error) {
	var env []string
	var read []Path
	for _, name := range TrustEnv {
		v := getenv(name)
		if v == "" {
			continue
		}
		parts := []string{v}
		if name == "SSL_CERT_DIR" {
			parts = strings.Split(v, ":")
		}
		var resolved []string
		for _, part := range parts {
			if part == "" {
				continue
			}
			path, err := grantPath(h, part)
			if err == nil {
				_, err = os.Stat(path)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s in the core's environment: %w: it names the TLS certificates plugins trust; fix or unset it where the core starts (for the service: in its unit's environment)", name, err)
			}
			resolved = append(resolved, path)
			read = append(read, Path{Path: path, Why: name + ": TLS certificates to trust (the core's environment)"})
		}
		if len(resolved) > 0 {
			env = append(env, name+"="+strings.Join(resolved, ":"))
		}
	}
	return env, read, nil
}

// For computes the policy of plugin name, whose folder is dir and handler
// exec. An error names what to fix in config.toml or the manifest.
func For(h home.Dir, name, dir, exec string, m *manifest.Manifest, pc config.Plugin) (Policy, error) {
	p := Policy{
		Plugin:     name,
		Exec:       exec,
		Read:       []Path{{Path: filepath.Clean(dir), Why: "its folder"}},
		Write:      []Path{{Path: h.DataDir(name), Why: "its data folder (its temp folder is inside)"}},
		Unconfined: pc.Unconfined,
	}
	if m == nil {
		return p, nil
	}
	for _, g := range m.Filesystem {
		v, ok := pc.Config[g.Config]
		if !ok {
			continue // not granted
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return p, fmt.Errorf("plugins.%s.config.%s must be the path of a folder (a string)", name, g.Config)
		}
		path, err := grantPath(h, s)
		if err != nil {
			return p, fmt.Errorf("plugins.%s.config.%s: %w", name, g.Config, err)
		}
		gp := Path{Path: path, Why: "config " + g.Config + ": " + g.Description}
		if g.Write {
			p.Write = append(p.Write, gp)
		} else {
			p.Read = append(p.Read, gp)
		}
	}
	if m.Network == nil {
		return p, nil
	}
	env, read, err := trust(h, os.Getenv)
	if err != nil {
		return p, err
	}
	p.Env, p.Read = env, append(p.Read, read...)
	p.Public = m.Network.Public
	for _, hp := range m.Network.Hosts {
		host, port, err := manifest.SplitHost(hp)
		if err != nil {
			return p, fmt.Errorf("manifest network.hosts: %w", err)
		}
		p.addHost(Host{Name: host, Port: port, From: "manifest"})
	}
	defaults := schemaDefaults(m.ConfigSchema)
	for _, key := range m.Network.HostsFromConfig {
		vals, err := lookup(pc.Config, defaults, key)
		if err != nil {
			return p, fmt.Errorf("plugins.%s.config.%s: %w", name, key, err)
		}
		for _, v := range vals {
			host, err := parseHost(v.value)
			if err != nil {
				return p, fmt.Errorf("plugins.%s.config.%s: %w", name, v.key, err)
			}
			host.From = "config " + v.key
			p.addHost(host)
		}
	}
	return p, nil
}

func (p *Policy) addHost(h Host) {
	if !slices.ContainsFunc(p.Hosts, func(o Host) bool { return o.Name == h.Name && o.Port == h.Port }) {
		p.Hosts = append(p.Hosts, h)
	}
}

// grantPath checks a folder the user grants: absolute (or ~/…), not the
// root, and neither holding nor inside the Carapace home, where the
// credentials, the config and every other plugin's data are.
func grantPath(h home.Dir, s string) (string, error) {
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		uh, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%q: the home folder is unknown: %w", s, err)
		}
		s = filepath.Join(uh, rest)
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("%q is not an absolute path: write /full/path or ~/path", s)
	}
	path := filepath.Clean(s)
	if path == "/" {
		return "", fmt.Errorf("%q is the whole disk: grant the one folder the plugin needs", s)
	}
	hd := filepath.Clean(string(h))
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	if rh, err := filepath.EvalSymlinks(hd); err == nil {
		hd = rh
	}
	if within(hd, path) || within(path, hd) {
		return "", fmt.Errorf("%q holds or lies inside the Carapace home %s, where the credentials and other plugins' data are: grant a folder outside it", s, hd)
	}
	return path, nil
}

// within reports whether path is root or inside it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// defaultPorts are the ports of the URL schemes a config may name a host with.
var defaultPorts = map[string]uint16{
	"http": 80, "https": 443, "ws": 80, "wss": 443,
	"imap": 143, "imaps": 993, "smtp": 587, "smtps": 465, "submission": 587,
	"caldav": 443, "caldavs": 443,
}

// parseHost reads a config value naming a host: a URL (scheme://host[:port]/…)
// or host:port.
func parseHost(s string) (Host, error) {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return Host{}, fmt.Errorf("%q is not a URL with a host", s)
		}
		if u.User != nil {
			return Host{}, fmt.Errorf("%q carries a user name or password: put credentials in `carapace auth set`, not in a URL", s)
		}
		port := u.Port()
		if port == "" {
			dp, ok := defaultPorts[strings.ToLower(u.Scheme)]
			if !ok {
				return Host{}, fmt.Errorf("%q: the scheme %q has no default port here: write the port", s, u.Scheme)
			}
			port = strconv.Itoa(int(dp))
		}
		s = net.JoinHostPort(u.Hostname(), port)
	}
	host, port, err := manifest.SplitHost(s)
	if err != nil {
		return Host{}, err
	}
	return Host{Name: host, Port: port}, nil
}

// schemaDefaults returns the "default" of each top-level property of a
// config schema.
func schemaDefaults(raw json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	out := map[string]any{}
	for k, p := range s.Properties {
		if p.Default != nil {
			out[k] = p.Default
		}
	}
	return out
}

type found struct {
	key   string // the concrete key, e.g. "accounts.0.imap"
	value string
}

// lookup finds the string values a dotted key with * wildcards names in
// the config; a missing top-level key takes the schema's default. A key
// that names nothing is no host (the plugin reaches nothing through it).
func lookup(cfg, defaults map[string]any, key string) ([]found, error) {
	parts := strings.Split(key, ".")
	var root any = cfg
	if _, ok := cfg[parts[0]]; !ok {
		d, ok := defaults[parts[0]]
		if !ok {
			return nil, nil
		}
		root = map[string]any{parts[0]: d}
	}
	var out []found
	var walk func(v any, at string, rest []string) error
	walk = func(v any, at string, rest []string) error {
		if len(rest) == 0 {
			switch t := v.(type) {
			case string:
				out = append(out, found{key: at, value: t})
				return nil
			case nil:
				return nil
			default:
				return fmt.Errorf("%s must be a URL or host:port (a string)", at)
			}
		}
		join := func(k string) string {
			if at == "" {
				return k
			}
			return at + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			if rest[0] == "*" {
				keys := make([]string, 0, len(t))
				for k := range t {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					if err := walk(t[k], join(k), rest[1:]); err != nil {
						return err
					}
				}
				return nil
			}
			if c, ok := t[rest[0]]; ok {
				return walk(c, join(rest[0]), rest[1:])
			}
			return nil
		case []any:
			for i, c := range t {
				if rest[0] != "*" && rest[0] != strconv.Itoa(i) {
					continue
				}
				if err := walk(c, join(strconv.Itoa(i)), rest[1:]); err != nil {
					return err
				}
			}
			return nil
		default:
			return nil
		}
	}
	if err := walk(root, "", parts); err != nil {
		return nil, err
	}
	return out, nil
}
