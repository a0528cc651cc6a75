package pluginproto_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
)

// protoConstants returns the string constants proto.go declares, by the
// prefix of their name ("Method", "Kind", "Type", "Env"): the protocol's
// vocabulary, read from the source so that nothing added escapes the tests.
func protoConstants(t *testing.T) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "proto.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				for _, prefix := range []string{"Method", "Kind", "Type", "Env"} {
					if strings.HasPrefix(name.Name, prefix) {
						out[prefix] = append(out[prefix], v)
					}
				}
			}
		}
	}
	if len(out["Method"]) == 0 || len(out["Kind"]) == 0 || len(out["Type"]) == 0 || len(out["Env"]) == 0 {
		t.Fatalf("proto.go declares %v: the parse found too little", out)
	}
	return out
}

const page = "../../../docs/PLUGIN-PROTOCOL.md"

// TestProtocolPage keeps docs/PLUGIN-PROTOCOL.md true to the code: it
// names every message type, method, error kind and environment variable
// of proto.go (in backquotes), states the limits with their values, and
// every frame it shows is, byte for byte, one of the golden frames.
func TestProtocolPage(t *testing.T) {
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for prefix, values := range protoConstants(t) {
		for _, v := range values {
			if !strings.Contains(text, "`"+v+"`") {
				t.Errorf("the page does not name %s %q (write it as `%s`)", strings.ToLower(prefix), v, v)
			}
		}
	}
	for what, n := range map[string]int{
		"MaxMessage": pluginproto.MaxMessage, "MaxResult": pluginproto.MaxResult,
		"Version": pluginproto.Version, "HelloTimeout (s)": int(pluginproto.HelloTimeout.Seconds()),
	} {
		var want string
		switch what {
		case "Version":
			want = "version " + strconv.Itoa(n)
		case "HelloTimeout (s)":
			want = strconv.Itoa(n) + " s"
		default:
			want = strconv.Itoa(n) + " bytes"
		}
		if !strings.Contains(text, want) {
			t.Errorf("the page does not state %s as %q", what, want)
		}
	}

	goldens := map[string]bool{}
	entries, err := os.ReadDir(filepath.Join("testdata", "frames"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "frames", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		goldens[string(bytes.TrimSuffix(b, []byte("\n")))] = true
	}
	shown := 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text()) // frames in a list item are indented
		if !strings.HasPrefix(l, `{"type":`) {
			continue
		}
		shown++
		if !goldens[l] {
			t.Errorf("%s:%d shows a frame that is not a golden frame (copy it from testdata/frames):\n%s", page, line, l)
		}
	}
	if shown < 10 {
		t.Errorf("the page shows %d frames; the check above needs them on lines of their own", shown)
	}
}
