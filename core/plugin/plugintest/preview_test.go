package plugintest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// drafts is a handler with a previewed tool, send {id}, whose content is
// a draft it keeps: the shape of mail_send.
type drafts struct {
	mu   sync.Mutex
	text map[string]string
	sent []string
}

func (d *drafts) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (d *drafts) Shutdown(context.Context) error                              { return nil }

func (d *drafts) Preview(_ context.Context, req *plugin.Request) (*plugin.Preview, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, _ := req.Arguments["id"].(string)
	t, ok := d.text[id]
	if !ok {
		return nil, plugin.NewToolError("no draft "+id, false)
	}
	return &plugin.Preview{Text: "Send:\n" + t, Digest: plugin.Digest([]byte(t))}, nil
}

func (d *drafts) Invoke(_ context.Context, req *plugin.Request) (map[string]any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, _ := req.Arguments["id"].(string)
	t := d.text[id]
	if err := req.CheckDigest(plugin.Digest([]byte(t))); err != nil {
		return nil, err
	}
	d.sent = append(d.sent, t)
	return map[string]any{"sent": id}, nil
}

// The harness previews a call as the core does, and invokes it with the
// approved digest: the same content is sent, a changed one is refused
// with CONTENT_CHANGED, and so is a call without a digest.
func TestPreviewAndApprove(t *testing.T) {
	d := &drafts{text: map[string]string{"d1": "Hello"}}
	h := plugintest.New(t, d)
	args := map[string]any{"id": "d1"}
	pv, err := h.Preview("send", args)
	if err != nil || pv.Text != "Send:\nHello" {
		t.Fatalf("Preview: %+v, %v", pv, err)
	}
	if _, err := h.Preview("send", map[string]any{"id": "nope"}); err == nil {
		t.Fatal("a preview of a missing draft succeeded")
	}
	plugintest.AssertSuccess(t, h.Invoke("send", args, plugintest.WithPreviewDigest(pv.Digest)))
	r := h.Invoke("send", args) // no approved digest
	if r.OK() || r.HandlerCode != plugin.CodeContentChanged {
		t.Fatalf("a call without a digest: %+v", r)
	}
	d.mu.Lock()
	d.text["d1"] = "Hello, and wire the money"
	d.mu.Unlock()
	r = h.Invoke("send", args, plugintest.WithPreviewDigest(pv.Digest))
	if r.OK() || r.HandlerCode != plugin.CodeContentChanged {
		t.Fatalf("a changed draft: %+v", r)
	}
	if len(d.sent) != 1 || d.sent[0] != "Hello" {
		t.Fatalf("sent %q; want only the approved content", d.sent)
	}
}
