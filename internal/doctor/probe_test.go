package doctor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/openai"
)

// The tool-call probe tells each way an endpoint fails apart, with a fix
// that fits it.
func TestToolProbeTellsFailuresApart(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		stream      bool
		detail, fix string
		wantStatus  string
	}{
		{name: "server error", status: 500, body: `{"error":{"message":"CUDA out of memory","type":"server_error"}}`,
			detail: "HTTP 500 (a 5xx", fix: "server's log", wantStatus: Fail},
		{name: "plain 500", status: 500, body: `Internal Server Error`, detail: "5xx", fix: "server's log", wantStatus: Fail},
		{name: "tools refused", status: 400, body: `{"error":{"message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError"}}`,
			detail: "refused the tools field", fix: "enable tool calling", wantStatus: Fail},
		{name: "model missing", status: 404, body: `{"error":{"message":"The model ` + "`m`" + ` does not exist.","type":"invalid_request_error","code":"model_not_found"}}`,
			detail: `the model "m" is not served`, fix: "--model", wantStatus: Fail},
		{name: "text only", status: 200, body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`,
			detail: "no tool call in the reply", fix: "--enable-auto-tool-choice", wantStatus: Fail},
		{name: "not a stream", status: 200, stream: true, body: "<html>gateway</html>\n",
			detail: "not a server-sent-event stream", fix: "--provider", wantStatus: Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			client := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", Stream: tt.stream})
			c := toolProbe(context.Background(), Endpoint{Provider: "openai", BaseURL: srv.URL + "/v1", Model: "m", Client: client})
			if c.Status != tt.wantStatus || !strings.Contains(c.Detail, tt.detail) || !strings.Contains(c.Fix, tt.fix) {
				t.Fatalf("got %s %q (fix %q); want %s with %q and a fix with %q", c.Status, c.Detail, c.Fix, tt.wantStatus, tt.detail, tt.fix)
			}
		})
	}
}
