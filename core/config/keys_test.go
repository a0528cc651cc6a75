package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	keys := Keys()
	for _, want := range []string{"runtime.engine", "sessions.max_per_group", "groups.*.topics", "plugins.*.surface", "plugins.*.config", "tasks.max_failures", "core.handler_timeout"} {
		if !slices.Contains(keys, want) {
			t.Errorf("Keys lacks %s: %v", want, keys)
		}
	}
}

func TestSuggest(t *testing.T) {
	for key, want := range map[string]string{
		"runtime.engin":          "runtime.engine",
		"runtime.enigne":         "runtime.engine",
		"sessions.max_per_grop":  "sessions.max_per_group",
		"groups.family.topic":    "groups.family.topics",
		"tasks.max_failure":      "tasks.max_failures",
		"completely.different":   "",
		"runtime.something_else": "",
	} {
		if got := Suggest(key); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []string // each problem's String
	}{
		{"good", "[runtime]\nengine = \"docker\"\n[groups.main]\n[plugins.telegram.config.chats]\n\"-100\" = \"family\"\n", nil},
		{"syntax", "[runtime]\nengine = \"docker\"\nimage = \n", []string{"line 3: "}},
		{"unknown keys, each on its line", "[runtime]\nengin = \"docker\"\n\n[groups.main]\ntopic = [\"message.inbound\"]\nbogus = 1\n",
			[]string{"line 2: unknown key runtime.engin (did you mean runtime.engine?)", "line 5: unknown key groups.main.topic (did you mean groups.main.topics?)", "line 6: unknown key groups.main.bogus"}},
		{"a dotted key at the top", "runtime.enigne = \"docker\"\n", []string{"line 1: unknown key runtime.enigne (did you mean runtime.engine?)"}},
		{"a value the core refuses", "[runtime]\nengine = \"vmware\"\n", []string{"line 2: runtime.engine \"vmware\""}},
		// Every problem of every kind, each on its line, in the file's
		// order: not only the first, and not only one kind.
		{"every problem of every kind", manyProblems, []string{
			"line 2: runtime.engine \"vmware\": use one of",
			"line 3: runtime.memory_mb: at least 64",
			"line 4: unknown key runtime.engin (did you mean runtime.engine?)",
			"line 6: sessions.max_per_group must be an integer (it is a string)",
			"line 7: sessions.idle_timeout: duration \"soon\": use a number with a unit",
			"line 8: sessions.queue must not be negative",
			"line 10: groups.main.topics: \"agent.started\" does not start sessions",
			"line 11: unknown key groups.main.bogus",
			"line 13: llm.port must be an integer (it is a number with a fraction)",
			"line 14: llm.upstream: \"http://api.example\": plain http is allowed only to a loopback address",
			"line 15: unknown key sesions (did you mean sessions?)",
			"line 18: rate_limit.tools.echo.per_minute must be positive",
			"line 20: plugins.echo.allowed_groups must be a list of strings",
			"line 21: plugins.echo.surface must be true or false (it is a string)",
		}},
		{"tables and values in each other's place", "sessions = 3\nllm = { port = 1.5, bogus = 2 }\n[[runtime]]\nengine = \"docker\"\n[plugins.t]\nconfig = 3\n[group.main]\ntopics = 1\n[core.handler_timeout]\nx = 1\n", []string{
			"line 1: sessions must be a table (it is an integer)",
			"line 2: llm.port must be an integer (it is a number with a fraction)",
			"line 2: unknown key llm.bogus",
			"line 3: runtime must be a table (it is a list of tables)",
			"line 6: plugins.t.config must be a table (it is an integer)",
			"line 7: unknown key group.main (did you mean groups.main?)",
			"line 9: core.handler_timeout must be a duration in quotes",
		}},
		{"a syntax error says the rest is unread", "[runtime]\nengin = 1\nimage = \n", []string{"line 3: ", "cannot be read past it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probs, err := Validate(write(t, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "a syntax error says the rest is unread" {
				if len(probs) != 1 || !strings.Contains(probs[0].String(), tc.want[0]) || !strings.Contains(probs[0].String(), tc.want[1]) {
					t.Fatalf("problems %q, want one syntax error saying so", probs)
				}
				return
			}
			if len(probs) != len(tc.want) {
				t.Fatalf("problems %q, want %d", probs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(probs[i].String(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, probs[i], w)
				}
			}
		})
	}
	// Load says the same, with the line and the suggestion.
	_, err := Load(write(t, "[runtime]\nengin = \"docker\"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: unknown key runtime.engin (did you mean runtime.engine?)") {
		t.Fatalf("Load: %v", err)
	}
}

// manyProblems is a config.toml with problems of every kind a loadable
// TOML file can have: values the core refuses, unknown keys (one a whole
// table), values of the wrong type, and a bad duration.
const manyProblems = `[runtime]
engine = "vmware"
memory_mb = 8
engin = "docker"
[sessions]
max_per_group = "two"
idle_timeout = "soon"
queue = -1
[groups.main]
topics = ["agent.started"]
bogus = 1
[llm]
port = 80.5
upstream = "http://api.example"
[sesions]
max_per_group = 2
[rate_limit.tools.echo]
per_minute = 0
[plugins.echo]
allowed_groups = "main"
surface = "yes"
`

func TestEffectiveAndGet(t *testing.T) {
	c, err := Load(write(t, "[runtime]\nengine = \"docker\"\n[groups.main]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(write(t, string(b)))
	if err != nil {
		t.Fatalf("the effective config does not load: %v\n%s", err, b)
	}
	b2, _ := again.Effective()
	if string(b) != string(b2) {
		t.Errorf("the effective config changed on a round trip:\n%s\n---\n%s", b, b2)
	}
	for key, want := range map[string]string{"runtime.engine": `"docker"`, "sessions.max_per_group": "3", "tasks.max_failures": "3", "groups.main.topics": `["message.inbound", "task.triggered"]`} {
		if got, err := c.Get(key); err != nil || got != want {
			t.Errorf("Get(%s) = %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := c.Get("runtime.engin"); err == nil || !strings.Contains(err.Error(), "did you mean runtime.engine?") {
		t.Errorf("Get of a typo: %v", err)
	}
}

func TestSet(t *testing.T) {
	orig := "# my settings\n[runtime]\nengine = \"podman\"  # was docker\nimage = \"x\"\n\n[groups.main]\n"
	for _, tc := range []struct {
		name, data, key, value, want, err string
	}{
		{"replace, comments kept", orig, "runtime.engine", "docker", "# my settings\n[runtime]\nengine = \"docker\"\nimage = \"x\"\n\n[groups.main]\n", ""},
		{"add under its header", orig, "runtime.cpus", "1.5", "# my settings\n[runtime]\ncpus = 1.5\nengine = \"podman\"  # was docker\nimage = \"x\"\n\n[groups.main]\n", ""},
		{"add a table", orig, "groups.family.topics", `["message.inbound"]`, orig + "\n[groups.family]\ntopics = [\"message.inbound\"]\n", ""},
		{"an empty file", "", "tasks.max_failures", "5", "[tasks]\nmax_failures = 5\n", ""},
		{"a string with a quote", "", "runtime.image", `my "image"`, "[runtime]\nimage = \"my \\\"image\\\"\"\n", "not an image reference"},
		{"a plugin's own config", "", "plugins.telegram.config.owner_id", "4242", "[plugins.telegram.config]\nowner_id = 4242\n", ""},
		{"an unknown key", orig, "runtime.engin", "docker", "", "unknown key runtime.engin (did you mean runtime.engine?)"},
		{"a value the core refuses", orig, "runtime.engine", "vmware", "", `runtime.engine = "vmware" would not load`},
		{"a value of the wrong type", orig, "sessions.max_per_group", "many", "", "would not load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Set([]byte(tc.data), tc.key, tc.value)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Set: %v (%q), want an error with %q", err, got, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Set: %v\n%q\nwant\n%q", err, got, tc.want)
			}
		})
	}
}

// The template loads as the defaults, and so does every setting in it
// uncommented: what it says is the default is the default.
func TestTemplate(t *testing.T) {
	const version = "1.2.3"
	tmpl := Template(version)
	path := write(t, string(tmpl))
	want, err := Load(path)
	if err != nil {
		t.Fatalf("the template does not load: %v", err)
	}
	defaults, err := Load(filepath.Join(t.TempDir(), "absent.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want.Digest, defaults.Digest = "", "" // the files differ; their settings do not
	if !reflect.DeepEqual(want, defaults) {
		t.Fatalf("the template sets something:\n%+v\nwant the defaults\n%+v", want, defaults)
	}
	settingRE := regexp.MustCompile(`^# ([a-z_]+ = .*?)(\s+#.*)?$`)
	lines := strings.Split(string(tmpl), "\n")
	n := 0
	for i, l := range lines {
		m := settingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		un := slices.Clone(lines)
		un[i] = m[1]
		if strings.HasPrefix(m[1], "topics") { // under a commented [groups.main]
			un[i-1] = "[groups.main]"
		}
		got, err := Load(write(t, strings.Join(un, "\n")))
		if err != nil {
			t.Errorf("line %d uncommented, %q: %v", i+1, m[1], err)
			continue
		}
		got.Digest = ""
		if strings.HasPrefix(m[1], "image") {
			if got.Runtime.Image != "carapace-agent:"+version {
				t.Errorf("image = %q", got.Runtime.Image)
			}
			continue
		}
		if strings.HasPrefix(m[1], "topics") {
			if !reflect.DeepEqual(got.Groups["main"].Topics, SpawnTopics) {
				t.Errorf("the commented group's topics %v are not the default %v", got.Groups["main"].Topics, SpawnTopics)
			}
			continue
		}
		if !reflect.DeepEqual(got, defaults) {
			t.Errorf("line %d uncommented, %q, is not the default:\n%+v", i+1, m[1], got)
		}
	}
	if n < 20 {
		t.Fatalf("only %d settings in the template", n)
	}
}

// Quote makes a string Set stores as that string, whatever it looks like.
func TestQuote(t *testing.T) {
	for _, s := range []string{"docker", "true", "3", `["a"]`, `a "b" \c`, "line\nbreak", "tab\there"} {
		out, err := Set(nil, "plugins.x.config.name", Quote(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		c, err := Load(write(t, string(out)))
		if err != nil || c.Plugins["x"].Config["name"] != s {
			t.Errorf("Quote(%q) stored %#v, %v", s, c.Plugins["x"].Config["name"], err)
		}
	}
}
