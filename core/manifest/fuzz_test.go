package manifest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; every problem is located and explained;
// a manifest Parse accepts encodes and parses again to the same manifest.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":{"a":{"a":[[[[{"b":"\u0000"}]]]]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("m.json", data, Options{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("error %T without problems: %v", err, err)
			}
			for _, p := range e.Problems {
				if p.File != "m.json" || p.Message == "" || p.Fix == "" || p.Warning || (p.Pointer != "" && !strings.HasPrefix(p.Pointer, "/")) {
					t.Fatalf("malformed problem %#v", p)
				}
			}
			if m != nil {
				t.Fatal("a manifest and an error")
			}
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v", err)
		}
		m2, err := Parse("m.json", b, Options{})
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v\n%s\nfrom\n%q", err, b, data)
		}
		b2, err := json.Marshal(m2)
		if err != nil || string(b) != string(b2) {
			t.Fatalf("not stable:\n%s\n%s", b, b2)
		}
	})
}
