package llmproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The body check. The model API can itself reach the network, or data
// outside the conversation, on a request's behalf: server tools (web
// search and web fetch fetch what the model asks; code execution, tool
// search and the advisor run at the API, where Carapace cannot see what
// they do), the MCP connector (mcp_servers, which the API connects to),
// a code-execution container (container), a Files API upload into one
// (container_upload blocks), and image and document sources that name a
// URL (which the API fetches) or a Files API file (stored outside the
// conversation). Any of them would let an agent with no network reach
// one. The generally available ones need no anthropic-beta header, so
// dropping betas (Options.DeniedBetas) cannot stop them; checkBody reads
// the body of every POST and refuses a request that asks for one.
//
// Tools are checked against an allow-list, not a deny-list: a tool
// passes only if its type is absent, null or "custom" (a tool the client
// defines and runs), or one of the Anthropic-defined tools the client
// runs itself (bash_, text_editor_, computer_ and memory_ with a date:
// the API sends the agent a tool call, the agent's container runs it).
// Every other type is a server tool, or one not invented yet, and is
// refused: a deny-list by name would pass the next network tool until
// someone added it. Sources are allow-listed the same way: base64, text
// and content (blocks given inline) pass; url, file and any other do not.
//
// The top-level fields that reach out (mcp_servers, container) are
// refused by name: an allow-list of top-level fields would refuse every
// new field Claude Code starts to send, and a refused request is a
// session that stops working.
//
// The check reads the JSON the way a server might and refuses what it
// cannot read, so that a reader that disagrees cannot be used to slip a
// tool past it: every occurrence of a key is checked (a key written twice
// is checked twice, whichever one the API keeps), keys match in any case
// ("Tools", "TYPE"), escapes are decoded ("typ\u0065"), and a body that
// is not one JSON object — cut short, with a second value after it,
// nested past maxBlockDepth — is refused with 400. Only the structure
// that can ask for a fetch is walked: tools, and the blocks of messages
// and system (their type, source and content); a tool call's input, text
// and everything else is skipped unread, so the words "mcp_servers" or
// "url" in a conversation change nothing.

// clientToolType matches the types of the Anthropic-defined tools the
// client runs: bash_20250124, text_editor_20250728, computer_20251124,
// memory_20250818, and their later versions.
var clientToolType = regexp.MustCompile(`^(bash|text_editor|computer|memory)_[0-9]{8}$`)

// inlineSources are the source types whose data is in the request.
var inlineSources = []string{"base64", "text", "content"}

// maxBlockDepth bounds the nesting of content blocks the check follows
// (a tool result holding a document holding an image is 3).
const maxBlockDepth = 32

// bodyError is why a request body is not forwarded.
type bodyError struct {
	status int    // 403 (it asks the API to reach out) or 400 (it cannot be read)
	typ    string // the API error type
	code   string // the audit code
	field  string // where, as "tools[2]" or "messages[0].content[1].source"; "" for a 400
	msg    string // for the client and the audit: what and why, never the body's text
	detail string // more for the audit
}

func (e *bodyError) Error() string { return e.msg }

// checkBody returns why body must not be forwarded, or nil.
func checkBody(body []byte) *bodyError {
	w := &bodyWalker{dec: json.NewDecoder(bytes.NewReader(body))}
	w.dec.UseNumber()
	err := w.request()
	if err == nil {
		return nil
	}
	var be *bodyError
	if errors.As(err, &be) {
		return be
	}
	return &bodyError{status: http.StatusBadRequest, typ: "invalid_request_error", code: CodeBadRequest,
		msg:    "Carapace could not read the request body as one JSON object, so it did not send it",
		detail: jsonDetail(err)}
}

// jsonDetail describes why a body is not JSON, without its text.
func jsonDetail(err error) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	return err.Error()
}

// Reasons the walker stops that are not the JSON's syntax.
var (
	errNotObject = errors.New("the body is not a JSON object")
	errTrailing  = errors.New("data follows the JSON object")
	errTooDeep   = fmt.Errorf("content blocks nested more than %d deep", maxBlockDepth)
)

// bodyWalker walks a request body with one decoder, once.
type bodyWalker struct {
	dec  *json.Decoder
	raw  json.RawMessage // where skipped values go; its buffer is reused
	path []string        // the field being read: "messages", "[0]", "content"…
}

// field returns the path as "messages[0].content".
func (w *bodyWalker) field() string {
	var b strings.Builder
	for _, p := range w.path {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// in runs f with name (a field, or an index as "[3]") added to the path.
func (w *bodyWalker) in(name string, f func() error) error {
	w.path = append(w.path, name)
	err := f()
	w.path = w.path[:len(w.path)-1]
	return err
}

// refuse returns the refusal of the field being read.
func (w *bodyWalker) refuse(format string, a ...any) error {
	f := w.field()
	return &bodyError{status: http.StatusForbidden, typ: "permission_error", code: CodeNetworkFeature,
		field: f, msg: "Carapace refuses " + f + ": " + fmt.Sprintf(format, a...)}
}

// request walks the top-level object.
func (w *bodyWalker) request() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errNotObject
	}
	err = w.members(func(key string) error {
		switch {
		case strings.EqualFold(key, "tools"):
			return w.in("tools", func() error { return w.tools(0) })
		case strings.EqualFold(key, "mcp_servers"):
			return w.in("mcp_servers", func() error {
				return w.refuse("the MCP connector makes the model API connect to the servers it names, a way out of a container that has no network; give the agent tools through Carapace plugins instead")
			})
		case strings.EqualFold(key, "container"):
			return w.in("container", func() error {
				return w.refuse("it names a code execution container (and its skills) at the model API, and server-side code execution is not allowed")
			})
		case strings.EqualFold(key, "messages"):
			return w.in("messages", func() error { return w.blocks(0) })
		case strings.EqualFold(key, "system"):
			return w.in("system", func() error { return w.blocks(0) })
		}
		return w.skip()
	})
	if err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// members calls f with each key of the object whose '{' was just read; f
// must read the key's value. It reads the closing '}'.
func (w *bodyWalker) members(f func(key string) error) error {
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if err := f(key); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}

// elements calls f for each element of the array whose '[' was just read,
// with the element's index added to the path; f must read the element. It
// reads the closing ']'.
func (w *bodyWalker) elements(f func() error) error {
	for i := 0; w.dec.More(); i++ {
		if err := w.in("["+strconv.Itoa(i)+"]", f); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}

// skip reads the next value without looking at it.
func (w *bodyWalker) skip() error { return w.dec.Decode(&w.raw) }

// rest reads what is left of a value whose first token was tok: nothing
// for a scalar, the members or elements up to the end for an object or an
// array.
func (w *bodyWalker) rest(tok json.Token) error {
	switch tok {
	case json.Delim('{'):
		return w.members(func(string) error { return w.skip() })
	case json.Delim('['):
		for w.dec.More() {
			if err := w.skip(); err != nil {
				return err
			}
		}
		_, err := w.dec.Token()
		return err
	}
	return nil
}

// tools walks the tools list. A value that is not a list is the API's to
// refuse, but is read the same way, in case the API reads it as one: a
// list's elements (lists in lists included) as tools, an object as a
// tool.
func (w *bodyWalker) tools(depth int) error {
	if depth > maxBlockDepth {
		return errTooDeep
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		return w.elements(func() error { return w.tools(depth + 1) })
	case json.Delim('{'):
		return w.members(func(key string) error {
			if !strings.EqualFold(key, "type") {
				return w.skip()
			}
			return w.toolType()
		})
	}
	return nil
}

// toolType reads a tool's type and refuses any but a client tool's.
func (w *bodyWalker) toolType() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case nil:
		return nil
	case string:
		if v == "custom" || clientToolType.MatchString(v) {
			return nil
		}
		return w.refuse("type %s is a server tool: the model API runs it itself, where it can reach the network for the agent. Only client tools pass (no type or \"custom\", and the bash, text_editor, computer and memory tools), which the agent runs in its container", quoteType(v))
	}
	if err := w.rest(tok); err != nil {
		return err
	}
	return w.refuse("its type is not a string, so it is not a client tool")
}

// blocks walks a value that may hold content blocks: a list of them, one
// block (or a message, which holds its blocks in content), or text.
func (w *bodyWalker) blocks(depth int) error {
	if depth > maxBlockDepth {
		return errTooDeep
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		return w.elements(func() error { return w.blocks(depth + 1) })
	case json.Delim('{'):
		return w.block(depth + 1)
	}
	return nil
}

// block walks one block whose '{' was just read: its type, its source and
// its content. The rest (text, a tool call's input, citations) is
// skipped.
func (w *bodyWalker) block(depth int) error {
	return w.members(func(key string) error {
		switch {
		case strings.EqualFold(key, "type"):
			tok, err := w.dec.Token()
			if err != nil {
				return err
			}
			if s, ok := tok.(string); ok && strings.EqualFold(s, "container_upload") {
				return w.refuse("type \"container_upload\" loads a file of the Files API into a container at the model API, and server-side code execution is not allowed")
			}
			return w.rest(tok)
		case strings.EqualFold(key, "source"):
			return w.in("source", func() error { return w.source(depth) })
		case strings.EqualFold(key, "content"):
			return w.in("content", func() error { return w.blocks(depth) })
		}
		return w.skip()
	})
}

// source walks a block's source and refuses any but an inline one. A
// source that is a string (a search result's, naming where its text came
// from) is not fetched.
func (w *bodyWalker) source(depth int) error {
	tok, err := w.dec.Token()
	if err != nil || tok != json.Delim('{') {
		return errors.Join(err, w.rest(tok))
	}
	typed := false
	err = w.members(func(key string) error {
		switch {
		case strings.EqualFold(key, "type"):
			typed = true
			tok, err := w.dec.Token()
			if err != nil {
				return err
			}
			s, ok := tok.(string)
			switch {
			case ok && slices.Contains(inlineSources, s):
				return nil
			case s == "url":
				return w.refuse("type \"url\": the model API would fetch it, a way out of a container that has no network; send the image or document inline (base64 or text)")
			case s == "file":
				return w.refuse("type \"file\" names a file of the Files API, stored outside this conversation; send it inline (base64 or text)")
			case ok:
				return w.refuse("type %s: only sources given inline pass (base64, text or content)", quoteType(s))
			}
			if err := w.rest(tok); err != nil {
				return err
			}
			return w.refuse("its type is not a string: only sources given inline pass (base64, text or content)")
		case strings.EqualFold(key, "content"):
			return w.in("content", func() error { return w.blocks(depth) })
		}
		return w.skip()
	})
	if err != nil {
		return err
	}
	if !typed {
		return w.refuse("a source without a type: only sources given inline pass (base64, text or content)")
	}
	return nil
}

// typeName matches what quoteType shows of a type.
var typeName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// quoteType returns a type from the body, quoted, for the refusal (which
// is audited): as it is when it looks like a type name, a placeholder
// otherwise, so that the agent's text does not reach the audit log.
func quoteType(s string) string {
	if !typeName.MatchString(s) {
		return "(not a type name)"
	}
	return strconv.Quote(s)
}
