package plugin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Previewer is implemented by a handler whose manifest declares a tool
// with "preview": true: a tool whose call does more than its arguments
// say (mail_send {draft_id} sends a draft that lives on a server). Before
// the user is asked, the core calls Preview with the call as Invoke would
// get it (PreviewDigest empty); every surface shows the Preview's Text
// whole above the arguments, and the approval binds its Digest. When the
// call then runs, Invoke gets that digest in Request.PreviewDigest and
// must refuse, with CheckDigest, content that no longer renders to it.
//
// Preview must not change anything, and must honour ctx (the core gives
// it PreviewTimeout). A tool that declares a preview and whose handler
// does not implement Previewer, errs, times out, or returns an empty text
// or digest is refused at once: nobody is asked.
type Previewer interface {
	Preview(ctx context.Context, req *Request) (*Preview, error)
}

// Preview is what a call will do, for the person who approves it.
type Preview struct {
	// Text says what will happen, whole: for a mail, the From, every
	// To/Cc/Bcc address, the subject and the whole body. Lines end with
	// "\n". It is shown to people only — never to the agent — with
	// characters that could hide or reorder text escaped, and never cut:
	// a surface that cannot show all of it offers Deny only. At most
	// MaxPreviewText bytes of valid UTF-8.
	Text string `json:"text"`
	// Digest binds the approval to the content: computed by the handler
	// over the exact bytes the call will act on (Digest does it), so that
	// the same content always gives the same digest and any change gives
	// another. The core keeps it in the audit log and hands it back in
	// Request.PreviewDigest. At most MaxPreviewDigest printable ASCII
	// characters.
	Digest string `json:"digest"`
}

// Limits of a Preview, which the core enforces.
const (
	MaxPreviewText   = 256 << 10
	MaxPreviewDigest = 128
)

// CodeContentChanged is the ToolError code of CheckDigest: the content
// the user approved is not what the call would now act on.
const CodeContentChanged = "CONTENT_CHANGED"

// Digest returns the digest of content for a Preview: "sha256:" and the
// hex SHA-256 of the parts, each length-prefixed, so that no two lists of
// parts give the same digest (pass the exact bytes the call will act on:
// the raw message it will send, not a rendering of it).
func Digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// CheckDigest refuses, with a ToolError of code CONTENT_CHANGED, a call of
// a preview tool whose content now has another digest than the one the
// user approved (current: Digest of what the call would act on now), or
// that carries no approved digest at all. Invoke calls it first thing,
// once it has the content in hand, and acts on that same content:
//
//	if err := req.CheckDigest(plugin.Digest(raw)); err != nil {
//		return nil, err
//	}
func (r *Request) CheckDigest(current string) error {
	if r.PreviewDigest == "" {
		return &ToolError{Code: CodeContentChanged, Message: r.Tool + " was called without an approved preview, so it was not run"}
	}
	if subtle.ConstantTimeCompare([]byte(r.PreviewDigest), []byte(current)) != 1 {
		return &ToolError{Code: CodeContentChanged, Message: "the content changed after the user approved " + r.Tool + ", so it was not run; call it again to ask the user about the new content"}
	}
	return nil
}

// Check reports what is wrong with p, if anything: an empty text or
// digest, a text over MaxPreviewText or not UTF-8, a digest too long or
// not printable ASCII. The core refuses a call whose preview fails it.
func (p *Preview) Check() error {
	switch {
	case p == nil:
		return fmt.Errorf("the handler returned no preview")
	case strings.TrimSpace(p.Text) == "":
		return fmt.Errorf("the preview's text is empty")
	case len(p.Text) > MaxPreviewText:
		return fmt.Errorf("the preview's text is %d bytes, over the limit of %d", len(p.Text), MaxPreviewText)
	case !utf8.ValidString(p.Text):
		return fmt.Errorf("the preview's text is not valid UTF-8")
	case p.Digest == "":
		return fmt.Errorf("the preview has no digest")
	case len(p.Digest) > MaxPreviewDigest:
		return fmt.Errorf("the preview's digest is %d bytes, over the limit of %d", len(p.Digest), MaxPreviewDigest)
	case strings.IndexFunc(p.Digest, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		return fmt.Errorf("the preview's digest has characters that are not printable ASCII")
	}
	return nil
}
