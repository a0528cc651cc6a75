package pluginproto_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// The egress wire's golden frames: the request a plugin sends, and the
// two kinds of reply line the core writes on the passed stream.
var (
	egressRequest = pluginproto.EgressRequest{V: pluginproto.EgressVersion, Network: pluginproto.EgressNetworkTCP, Host: "api.telegram.org", Port: 443}
	egressOK      = pluginproto.EgressReply{OK: true, Addr: "149.154.167.220:443"}
	egressRefused = pluginproto.EgressReply{Code: pluginproto.EgressHostNotDeclared, Error: "api.example.com:443 is not among the plugin's declared hosts"}
)

func egressPath(file string) string { return filepath.Join("testdata", "egress", file) }

// TestEgressGoldenFrames encodes the request and both replies, compares
// each with its golden file (go test -update rewrites them), and decodes
// each file back to the same value.
func TestEgressGoldenFrames(t *testing.T) {
	req, err := pluginproto.EncodeEgressRequest(&egressRequest)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, egressPath("plugin-request.json"), append(req, '\n'))
	raw, err := os.ReadFile(egressPath("plugin-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pluginproto.DecodeEgressRequest(bytes.TrimSuffix(raw, []byte("\n")))
	if err != nil || *got != egressRequest {
		t.Fatalf("the golden request decodes to %+v, %v", got, err)
	}

	for file, r := range map[string]pluginproto.EgressReply{"core-reply-ok.json": egressOK, "core-reply-refused.json": egressRefused} {
		testutil.Golden(t, egressPath(file), pluginproto.EncodeEgressReply(&r))
		raw, err := os.ReadFile(egressPath(file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pluginproto.DecodeEgressReply(raw)
		if err != nil || *got != r {
			t.Fatalf("%s decodes to %+v, %v", file, got, err)
		}
	}
}

// TestEgressPage keeps the page's Network section true to the code: it
// names every refusal code, states the limits, and every request or reply
// it shows is a golden frame, byte for byte.
func TestEgressPage(t *testing.T) {
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, c := range pluginproto.EgressCodes {
		if !strings.Contains(text, "`"+c+"`") {
			t.Errorf("the page does not name the egress code %s (write it as `%s`)", c, c)
		}
	}
	for _, want := range []string{strconv.Itoa(pluginproto.MaxEgressRequest) + " bytes", "`" + pluginproto.EnvEgressFD + "`", "SOCK_SEQPACKET", "SCM_RIGHTS"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	goldens := map[string]bool{}
	entries, err := os.ReadDir(filepath.Join("testdata", "egress"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(egressPath(e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		goldens[string(bytes.TrimSuffix(b, []byte("\n")))] = true
	}
	if len(goldens) != 3 {
		t.Errorf("testdata/egress holds %d frames, want the request and two replies", len(goldens))
	}
	shown := 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, `{"v":`) && !strings.HasPrefix(l, `{"ok":`) {
			continue
		}
		shown++
		if !goldens[l] {
			t.Errorf("%s:%d shows an egress frame that is not a golden frame (copy it from testdata/egress):\n%s", page, line, l)
		}
	}
	if shown < 3 {
		t.Errorf("the page shows %d egress frames; want the request and both replies, on lines of their own", shown)
	}
}

func TestDecodeEgressRequest(t *testing.T) {
	for _, tc := range []struct {
		msg string
		ok  bool
	}{
		{`{"v":1,"network":"tcp","host":"api.telegram.org","port":443}`, true},
		{` {"v":1,"network":"udp","host":"","port":0} `, true}, // readable: the core refuses it with BAD_REQUEST
		{`{"v":1,"network":"tcp","host":"h","port":443,"via":"proxy"}`, false},
		{`{"v":2,"network":"tcp","host":"h","port":443}`, false},
		{`{"network":"tcp","host":"h","port":443}`, false},
		{`{"v":1,"network":"tcp","host":"h","port":65536}`, false},
		{`{"v":1,"network":"tcp","host":"h","port":-1}`, false},
		{`{"v":1,"network":"tcp","host":7,"port":1}`, false},
		{`{"v":1}{"v":1}`, false},
		{`{"v":1} x`, false},
		{`null`, false},
		{`[]`, false},
		{``, false},
		{`{"v":1,"network":"tcp","host":"` + strings.Repeat("a", pluginproto.MaxEgressRequest) + `","port":1}`, false},
	} {
		t.Run(tc.msg[:min(len(tc.msg), 60)], func(t *testing.T) {
			r, err := pluginproto.DecodeEgressRequest([]byte(tc.msg))
			if tc.ok != (err == nil) {
				t.Fatalf("DecodeEgressRequest = %+v, %v; want ok %v", r, err, tc.ok)
			}
			if err != nil && !errors.Is(err, pluginproto.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
	long := pluginproto.EgressRequest{V: 1, Network: "tcp", Host: strings.Repeat("a", pluginproto.MaxEgressRequest), Port: 1}
	if _, err := pluginproto.EncodeEgressRequest(&long); !errors.Is(err, pluginproto.ErrTooLarge) {
		t.Fatalf("an oversize request encodes: %v", err)
	}
}

// TestEgressReplyIsOneLine: whatever the message, the reply is one line
// of at most MaxEgressReply bytes, valid UTF-8, that decodes to the code.
func TestEgressReplyIsOneLine(t *testing.T) {
	for name, msg := range map[string]string{
		"short":      "no",
		"lines":      "first\nsecond\r\nthird\tend",
		"long":       strings.Repeat("é", 2000),
		"escapes":    strings.Repeat("<&>\"", 500),
		"bad utf-8":  strings.Repeat("\xff", 1500),
		"at the cap": strings.Repeat("a", pluginproto.MaxEgressReply-len(`{"ok":false,"code":"DIAL_FAILED","error":""}`)-1),
	} {
		t.Run(name, func(t *testing.T) {
			line := pluginproto.EncodeEgressReply(&pluginproto.EgressReply{Code: pluginproto.EgressDialFailed, Error: msg})
			if len(line) > pluginproto.MaxEgressReply || bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' || !utf8.Valid(line) {
				t.Fatalf("%d bytes, %d newlines: %q", len(line), bytes.Count(line, []byte("\n")), line)
			}
			r, err := pluginproto.DecodeEgressReply(line)
			if err != nil || r.OK || r.Code != pluginproto.EgressDialFailed || r.Error == "" {
				t.Fatalf("decodes to %+v, %v", r, err)
			}
			if name == "short" || name == "at the cap" {
				if r.Error != msg {
					t.Fatalf("the message was cut: %q", r.Error)
				}
			}
		})
	}
	for _, bad := range []string{`{"ok":true}`, `{"ok":false}`, `null`, `{"ok":true,"addr":"1.1.1.1:443"} x`, ``} {
		if r, err := pluginproto.DecodeEgressReply([]byte(bad)); err == nil {
			t.Errorf("DecodeEgressReply(%q) = %+v", bad, r)
		}
	}
	if r, err := pluginproto.DecodeEgressReply([]byte(`{"ok":true,"addr":"1.1.1.1:443","later":1}` + "\n")); err != nil || !reflect.DeepEqual(*r, pluginproto.EgressReply{OK: true, Addr: "1.1.1.1:443"}) {
		t.Errorf("a reply with a field added later: %+v, %v", r, err)
	}
}
