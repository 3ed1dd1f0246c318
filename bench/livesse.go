package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sessionflow/sessionflow/wire"
)

// followSSE reads the live text stream of session id from the HTTP API at
// base (GET /v1/sessions/{id}/live, Server-Sent Events) through hc until
// ctx is done: opened is called once the stream's first line is read (the
// server follows the session), on for each event's data.
func followSSE(ctx context.Context, hc *http.Client, base, id string, opened func(), on func(wire.LiveEvent)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+id+"/live", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
		return fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, strings.TrimSpace(body.String()))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	first := true
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			opened()
		}
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			event = ev
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if event == "error" {
			return fmt.Errorf("GET %s: the stream ended with an error: %s", req.URL, data)
		}
		var e wire.LiveEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("GET %s: %w", req.URL, err)
		}
		if e.Event == "" {
			e.Event = event
		}
		on(e)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("GET %s: the stream ended", req.URL)
}
