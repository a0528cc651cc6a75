package llmproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, target string
		ep             endpoint
		status         int
	}{
		{"POST", "/v1/messages", epMessages, 0},
		{"POST", "/v1/messages?beta=true", epMessages, 0},
		{"POST", "/v1/messages/count_tokens?beta=true", epCountTokens, 0},
		{"GET", "/v1/models", epModels, 0},
		{"GET", "/v1/models/claude-3-5-haiku-20241022", epModel, 0},
		{"GET", "/v1/models/claude-sonnet-4.5", epModel, 0},
		{"GET", "/v1/messages", epMessages, 405},
		{"HEAD", "/v1/models", epModels, 405},
		{"GET", "/v1/models/-x", epNone, 403},
		{"GET", "/v1/models/", epNone, 403},
		{"OPTIONS", "*", epNone, 403},
		{"CONNECT", "api.anthropic.com:443", epNone, 403},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method, r.RequestURI = tt.method, tt.target
		ep, _, status, msg := classify(r)
		if ep != tt.ep || status != tt.status || (status != 0) != (msg != "") {
			t.Errorf("%s %s: endpoint %d status %d %q, want %d %d", tt.method, tt.target, ep, status, msg, tt.ep, tt.status)
		}
	}
}

func TestMergeBetas(t *testing.T) {
	tests := []struct {
		lines   []string
		oauth   bool
		want    string
		dropped int
	}{
		{nil, false, "", 0},
		{nil, true, OAuthBeta, 0},
		{[]string{"a, b", "b,c,", " ,a"}, false, "a,b,c", 0},
		{[]string{"a," + OAuthBeta}, true, "a," + OAuthBeta, 0},
		{[]string{"mcp-client-2025-11-20,a", "web-fetch-2025-09-10"}, true, "a," + OAuthBeta, 2},
	}
	for _, tt := range tests {
		got, dropped := mergeBetas(tt.lines, tt.oauth, []string{"mcp-client-", "web-fetch-"})
		if got != tt.want || dropped != tt.dropped {
			t.Errorf("mergeBetas(%q, %v) = %q, %d; want %q, %d", tt.lines, tt.oauth, got, dropped, tt.want, tt.dropped)
		}
	}
	if got, _ := mergeBetas([]string{"mcp-client-2025-11-20"}, false, []string{}); got != "mcp-client-2025-11-20" {
		t.Errorf("with no denied betas: %q", got)
	}
}
