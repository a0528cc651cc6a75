package config

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Keys are every key config.toml may set, dotted ("runtime.engine"); the
// tables keyed by a name the user chooses are written with "*"
// ("groups.*.topics", "plugins.*.surface"). A plugin's own configuration
// (plugins.*.config) is the plugin's schema's business.
func Keys() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			key := prefix + name
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+".*.")
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]():
				walk(ft, key+".")
			default:
				out = append(out, key)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	slices.Sort(out)
	return out
}

// known reports whether k (a key of the file) is one of Keys, or a key of
// a plugin's own configuration.
func known(k toml.Key) bool {
	if len(k) > 3 && k[0] == "plugins" && k[2] == "config" {
		return true // the plugin's own
	}
	return slices.ContainsFunc(Keys(), func(p string) bool { return matches(p, k) })
}

// tables are the tables config.toml may hold, written as Keys writes
// keys ("sessions", "groups.*", "rate_limit.tools.*").
func tables() []string {
	var out []string
	for _, k := range Keys() {
		parts := strings.Split(k, ".")
		for i := 1; i < len(parts); i++ {
			if t := strings.Join(parts[:i], "."); !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// knownTable reports whether k (a key of the file) is one of tables.
func knownTable(k toml.Key) bool {
	return slices.ContainsFunc(tables(), func(t string) bool { return matches(t, k) })
}

// matches reports whether k is the key pattern p names ("*" matching any
// one part).
func matches(p string, k toml.Key) bool {
	ps := strings.Split(p, ".")
	if len(ps) != len(k) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != k[i] {
			return false
		}
	}
	return true
}

// Suggest returns the known key or table nearest to key (a typo's likely
// intent), or "" when none is near. A key under a table the user names
// (groups.NAME…) is compared with that name in place of "*".
func Suggest(key string) string {
	parts := strings.Split(key, ".")
	best, bestD := "", 1<<30
	for _, p := range append(Keys(), tables()...) {
		ps := strings.Split(p, ".")
		if len(ps) != len(parts) {
			continue
		}
		for i := range ps {
			if ps[i] == "*" {
				ps[i] = parts[i]
			}
		}
		cand := strings.Join(ps, ".")
		if d := distance(key, cand); d < bestD {
			best, bestD = cand, d
		}
	}
	if best == "" || bestD > max(2, len(key)/4) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Problem is one thing wrong in a config file.
type Problem struct {
	Line    int    `json:"line,omitempty"` // 1-based; 0 when it is not one line's
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Message)
	}
	return p.Message
}

// Validate reads the config file at path and returns every problem in it,
// each with its line where one line holds it: a syntax error, each unknown
// key (with the nearest known key), each value of the wrong type, and each
// value the core refuses. A syntax error is the only problem reported when
// there is one, since the file cannot be read past it. None means the core
// would load it. A missing file is no problem (the defaults).
func Validate(path string) ([]Problem, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return validateData(data)
}

// lineOf finds the line that sets key k in data: a "key =" line in k's
// table, or the table's header. 0 if it cannot tell.
func lineOf(data []byte, k toml.Key) int {
	table, leaf := strings.Join(k[:len(k)-1], "."), k[len(k)-1]
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "[[") && strings.HasSuffix(l, "]]"):
			cur = strings.TrimSpace(l[2 : len(l)-2])
			if cur == k.String() {
				return n // an array of tables where a table should be
			}
		case strings.HasPrefix(l, "["):
			if end := strings.Index(l, "]"); end > 0 {
				cur = strings.TrimSpace(l[1:end])
				if cur == k.String() {
					return n // a table that should not be there
				}
			}
		default:
			name, _, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			name = strings.Trim(strings.TrimSpace(name), `"'`)
			full := name
			if cur != "" {
				full = cur + "." + name
			}
			if full == k.String() || cur == table && name == leaf {
				return n
			}
		}
	}
	if len(k) > 1 {
		// A key inside an inline table or an array is on its parent's line.
		return lineOf(data, k[:len(k)-1])
	}
	return 0
}

// Effective returns c as TOML: every setting the core uses, defaults
// filled in. config.toml holds no secrets (credentials live in the
// credential store), so there is nothing to hide.
func (c *Config) Effective() ([]byte, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Get returns the value of key (dotted) in c, as TOML would write it.
func (c *Config) Get(key string) (string, error) {
	var m map[string]any
	b, err := c.Effective()
	if err != nil {
		return "", err
	}
	if _, err := toml.Decode(string(b), &m); err != nil {
		return "", err
	}
	var v any = m
	for _, part := range strings.Split(key, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = mm[part]
	}
	if v == nil {
		msg := fmt.Sprintf("no setting %s", key)
		if s := Suggest(key); s != "" && s != key {
			msg += " (did you mean " + s + "?)"
		} else if !known(toml.Key(strings.Split(key, "."))) {
			msg += ": carapace config keys lists them"
		}
		return "", errors.New(msg)
	}
	if mm, ok := v.(map[string]any); ok {
		var out bytes.Buffer
		if err := toml.NewEncoder(&out).Encode(mm); err != nil {
			return "", err
		}
		return strings.TrimSpace(out.String()), nil
	}
	return tomlValue(v)
}

// tomlValue writes v as a TOML value.
func tomlValue(v any) (string, error) {
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(map[string]any{"v": v}); err != nil {
		return "", err
	}
	return strings.TrimPrefix(strings.TrimSpace(out.String()), "v = "), nil
}

// Quote returns s as a TOML string value, for Set: Set takes a value that
// is not valid TOML as a string, but "true" or "3" would be read as TOML.
func Quote(s string) string {
	v, _ := tomlValue(s) // a string always encodes
	return v
}

// Set returns data, a config.toml, with key (dotted) set to value: value
// is a TOML value ("3", "true", `["a", "b"]`, `"docker"`), or else taken as
// a string. The key's line is replaced where it is set, added under its
// table's header otherwise, and the table added at the end if missing;
// every other line, comments included, stays as it was. The result must
// load: an unknown key (named with the one it likely meant) or a value
// the core refuses is an error, and data is not changed.
func Set(data []byte, key, value string) ([]byte, error) {
	return SetAll(data, [][2]string{{key, value}})
}

// SetAll is Set of several keys at once ({key, value} pairs, in order):
// the result must load with all of them set, not after each one, for
// settings that only make sense together (a custom upstream's provider,
// URL and auth).
func SetAll(data []byte, kvs [][2]string) ([]byte, error) {
	out := data
	var err error
	for _, kv := range kvs {
		if out, err = setLine(out, kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	probs, err := validateData(out)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.String()
		}
		var set []string
		for _, kv := range kvs {
			set = append(set, kv[0]+" = "+tomlOrQuoted(kv[1]))
		}
		return nil, fmt.Errorf("%s would not load: %s", strings.Join(set, ", "), strings.Join(msgs, "; "))
	}
	return out, nil
}

// tomlOrQuoted returns value as Set writes it.
func tomlOrQuoted(value string) string {
	val := strings.TrimSpace(value)
	var probe map[string]any
	if _, err := toml.Decode("v = "+val, &probe); err != nil || strings.ContainsAny(val, "\n\r") {
		return Quote(value)
	}
	return val
}

// setLine returns data with key's line set to value, unchecked.
func setLine(data []byte, key, value string) ([]byte, error) {
	k := toml.Key(strings.Split(key, "."))
	if len(k) < 2 || !known(k) {
		msg := "unknown key " + key
		if s := Suggest(key); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		return nil, errors.New(msg + ": carapace config keys lists them")
	}
	val := tomlOrQuoted(value)
	table, leaf := strings.Join(k[:len(k)-1], "."), k[len(k)-1]
	line := leaf + " = " + val
	lines := strings.Split(string(data), "\n")
	cur, header := "", -1
	done := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "["):
			if end := strings.Index(t, "]"); end > 0 {
				cur = strings.TrimSpace(strings.Trim(t[:end+1], "[]"))
				if cur == table {
					header = i
				}
			}
		case cur == table:
			name, _, ok := strings.Cut(t, "=")
			if ok && strings.Trim(strings.TrimSpace(name), `"'`) == leaf {
				lines[i] = l[:len(l)-len(strings.TrimLeft(l, " \t"))] + line
				done = true
			}
		}
		if done {
			break
		}
	}
	switch {
	case done:
	case header >= 0:
		lines = slices.Insert(lines, header+1, line)
	default:
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, "["+table+"]", line, "")
	}
	out := []byte(strings.Join(lines, "\n"))
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out, nil
}

// template is config.toml as `carapace setup` first writes it: every
// common setting commented out at its default, with what it does.
//
//go:embed template.toml
var template []byte

// Template returns a commented config.toml that sets nothing: each line
// of a setting is commented out at its default (the image's at
// carapace-agent:version), so that uncommenting one changes nothing until
// its value is edited.
func Template(version string) []byte {
	return bytes.Replace(template, []byte(`# image = "carapace-agent:1.0.0"`), []byte(`# image = "carapace-agent:`+version+`"`), 1)
}
