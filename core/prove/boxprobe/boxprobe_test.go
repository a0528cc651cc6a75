package boxprobe

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestHits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"nothing here", nil},
		{"key=sk-ant-api03-abc_DEF-9 rest", []string{"sk-ant-api03-abc_DEF-9"}},
		{"sk-ant-a\nsk-ant-b\"", []string{"sk-ant-a", "sk-ant-b"}},
		{"sk-ant-", []string{"sk-ant-"}},
		{"SK-ANT-upper", nil},
	} {
		var want []string
		for _, k := range tc.want {
			want = append(want, KeyHash(k))
		}
		if got := hits([]byte(tc.in), "sk-ant-"); !reflect.DeepEqual(got, want) {
			t.Errorf("hits(%q) = %v, want the hashes of %q", tc.in, got, tc.want)
		}
	}
}

// The scan finds a key in a file and in the environment, by where it is
// and its hash, and never prints the key itself.
func TestScan(t *testing.T) {
	dir := t.TempDir()
	const key = "sk-ant-api03-planted-in-a-file"
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{"a/b/notes.txt": "the key is " + key + ".\n", "clean.txt": "nothing\n"} {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CARAPACE_PROBE_TEST_KEY", "sk-ant-in-the-environment")
	obs := scan("sk-ant-", []string{dir}, 0)
	var keys []Observation
	var summary Observation
	for _, o := range obs {
		switch o.Probe {
		case ProbeKey:
			keys = append(keys, o)
		case ProbeScan:
			summary = o
		}
		if strings.Contains(o.Line(), "planted") || strings.Contains(o.Line(), "in-the-environment") {
			t.Errorf("an observation carries the key: %s", o.Line())
		}
	}
	want := []Observation{
		{Probe: ProbeKey, Target: "environment CARAPACE_PROBE_TEST_KEY", OK: true, Value: KeyHash("sk-ant-in-the-environment")},
		{Probe: ProbeKey, Target: filepath.Join(dir, "a", "b", "notes.txt"), OK: true, Value: KeyHash(key)},
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %+v, want %+v", keys, want)
	}
	if !summary.OK || !strings.HasPrefix(summary.Value, "its environment and 2 files,") {
		t.Errorf("summary %+v", summary)
	}
	// A limit below what is there stops the scan, and says so.
	if s := scan("sk-ant-", []string{dir}, 8); s[len(s)-1].OK || !strings.Contains(s[len(s)-1].Error, "not scanned") {
		t.Errorf("a scan past its limit: %+v", s[len(s)-1])
	}
}

func TestParse(t *testing.T) {
	o := Observation{Probe: ProbeTCP, Target: "1.1.1.1:443", Error: "connect: network is unreachable"}
	out := "entrypoint noise\n" + o.Line() + "\r\n" + Observation{Probe: ProbeScan, OK: true}.Line() + "\n"
	got, err := Parse(out)
	if err != nil || len(got) != 2 || got[0] != o {
		t.Fatalf("Parse: %+v %v", got, err)
	}
	if _, err := Parse(LinePrefix + "{broken\n"); err == nil {
		t.Error("a broken observation line parsed")
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/end\04`: `/end\04`, `/x\134y`: `/x\y`} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
