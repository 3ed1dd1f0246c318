package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A person points the worker at an OpenAI-compatible endpoint with
// --openai-compatible, its key in a variable named by key-env: `starter
// turn` streams the model's answer; a refused call ends the next turn
// "error" with the service's message. The key reaches the service and
// nothing else: not the worker's log, not the store.
func TestStarterTurnOpenAICompatible(t *testing.T) {
	const key = "sk-cli-e2e-SECRET-5d1c"
	var mu sync.Mutex
	var auths, models []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct{ Model string }
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		auths, models = append(auths, r.Header.Get("Authorization")), append(models, body.Model)
		n := len(auths)
		mu.Unlock()
		if n > 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`,
				strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"role":"assistant","content":null,"reasoning_content":"Greet."}`,
			`{"content":"Hello from "}`,
			`{"content":"the model."}`,
		} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	t.Setenv("SESSIONFLOW_E2E_MODEL_KEY", key) // the worker inherits the environment

	e := newEnv(t)
	cwd := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	e.workerArgs = []string{"--openai-compatible", "local=" + srv.URL + "/v1,key-env=SESSIONFLOW_E2E_MODEL_KEY"}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "o1", "--cwd", cwd, "--provider", "local", "--model", "local-model")

	out := e.mustStarter("", "turn", "--id", "o1", "--prompt", "hi", "--root", e.root, "--compression", "none")
	require.True(t, strings.HasSuffix(out, "Hello from the model.\nturn 1 completed\n"), "output:\n%s", out)

	out = e.mustStarter("", "turn", "--id", "o1", "--prompt", "again", "--root", e.root, "--compression", "none")
	require.Contains(t, out, "turn 2 error: ")
	require.Contains(t, out, "Incorrect API key provided: [redacted].")
	require.NotContains(t, out, key)

	mu.Lock()
	require.Equal(t, []string{"Bearer " + key, "Bearer " + key}, auths, "the refused call is not retried")
	require.Equal(t, []string{"local-model", "local-model"}, models)
	mu.Unlock()

	e.mustStarter("", "dispose", "--id", "o1")
	evs := e.stored("o1")
	requireContiguous(t, evs)
	var stored strings.Builder
	for _, ev := range evs {
		stored.Write(ev.Data)
	}
	require.Contains(t, stored.String(), `"reasoning"`)
	require.NotContains(t, stored.String(), key)
	require.NotContains(t, e.logs(), key)
}
