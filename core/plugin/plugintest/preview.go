package plugintest

import (
	"context"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// PreviewTimeout is how long the core gives a handler's Preview of one
// call (core/pipeline's DefaultPreviewTimeout).
const PreviewTimeout = 10 * time.Second

// WithPreviewDigest sets the digest of the preview the user approved
// (plugin.Request.PreviewDigest), as the core sets it on the call of a tool
// that declares a preview, once approved.
func WithPreviewDigest(d string) RequestOption {
	return func(r *plugin.Request) { r.PreviewDigest = d }
}

// Preview asks the handler for the preview of a call of tool with args,
// as the core does before it puts the call to the user: the request the
// handler would get (without a digest), within PreviewTimeout. It returns
// the preview, or why the core would refuse the call: the handler's
// error, no answer in time, or a preview the core does not accept
// (plugin.Preview.Check). A handler that does not implement
// plugin.Previewer fails the test. Then approve it as the user would:
//
//	pv, err := h.Preview("mail_send", args)
//	r := h.Invoke("mail_send", args, plugintest.WithPreviewDigest(pv.Digest))
func (hs *Harness) Preview(tool string, args map[string]any, opts ...RequestOption) (*plugin.Preview, error) {
	hs.t.Helper()
	pv, ok := hs.h.(plugin.Previewer)
	if !ok {
		hs.t.Fatalf("plugintest: %T does not implement plugin.Previewer (Preview), which a tool that declares \"preview\": true needs", hs.h)
	}
	norm, err := normalize(args)
	if err != nil {
		hs.t.Fatalf("Preview(%q): %v", tool, err)
	}
	req := NewRequest(tool, norm, opts...)
	req.PreviewDigest = ""
	ctx, cancel := context.WithTimeout(RequestContext(context.Background(), req), PreviewTimeout)
	defer cancel()
	type answer struct {
		p   *plugin.Preview
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- answer{err: fmt.Errorf("preview panicked: %v", v)}
			}
		}()
		p, err := pv.Preview(ctx, req)
		done <- answer{p, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, a.err
		}
		if err := a.p.Check(); err != nil {
			return nil, err
		}
		return a.p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no preview within %s", PreviewTimeout)
	}
}
