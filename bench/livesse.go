package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/wire"
)

// sseStandIn serves the live text of src's sessions as Server-Sent Events
// in the shapes of the HTTP API's /v1/sessions/{id}/live (event: chunk,
// reset or end; data: the wire.LiveEvent), flushing each event: a stand-in
// for package httpapi's route, to measure the hop through HTTP.
type sseStandIn struct {
	src livetext.Source
	srv *http.Server
	url string
}

func startSSEStandIn(src livetext.Source) (*sseStandIn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sseStandIn{src: src, url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions/{id}/live", s.live)
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sseStandIn) close() { _ = s.srv.Close() }

func (s *sseStandIn) live(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for e, err := range s.src.FollowLive(r.Context(), r.PathValue("id")) {
		if err != nil {
			return
		}
		b, _ := json.Marshal(e)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Event, b); err != nil {
			return
		}
		fl.Flush()
	}
}

// followSSE reads the live text stream of session id at base (the HTTP
// API's route) until ctx is done, calling on for each event.
func followSSE(ctx context.Context, base, id string, on func(wire.LiveEvent)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+id+"/live", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e wire.LiveEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("GET %s: %w", req.URL, err)
		}
		on(e)
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}
