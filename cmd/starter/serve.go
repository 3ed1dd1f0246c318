package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/webui"
)

const serveLong = `Serve the session API over HTTP (docs/API.md, "HTTP API"; the OpenAPI
document is served at /v1/openapi.yaml): the sessions of the store root with
their state, their stored events as JSON lines or Server-Sent Events that keep
following the logs, and the control calls (messages, cancel, approvals,
permissions, compact, dispose) passed to the session workflows through
Temporal. Any process that sees the store root and reaches Temporal can serve
it; the worker serves the same API with --http.

--http ADDR is where it listens: a bare port (8080) is 127.0.0.1:8080. An
address that is not loopback (0.0.0.0:8080) needs a bearer token,
--http-token or $` + httpapi.EnvToken + `, which every request must then send
(Authorization: Bearer TOKEN); on loopback the token is optional.

The store is only read. It is opened in the encoding its marker records
(--compression or $` + envCompression + ` when given must agree). It serves
until interrupted (Ctrl-C, SIGTERM); open streams end then.`

func newServeCmd(a *app) *cobra.Command {
	var addr, token, temporalUI string
	sf := &storeFlags{}
	var cf *connFlags
	cmd := &cobra.Command{
		Use:   "serve --http ADDR --root ROOT [--http-token TOKEN]",
		Short: "Serve the session API over HTTP",
		Long:  serveLong + lifecycleNote,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				return usageErrorf("--http is required")
			}
			if token == "" {
				token = a.getenv(httpapi.EnvToken)
			}
			_, loopback, err := httpapi.ListenAddress(addr)
			if err != nil {
				return usageErrorf("--http: %w", err)
			}
			if !loopback && token == "" {
				return usageErrorf("--http %s: %w (give --http-token or %s)", addr, httpapi.ErrTokenRequired, httpapi.EnvToken)
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			ln, err := httpapi.Listen(addr, token)
			if err != nil {
				return err
			}
			defer ln.Close()
			return a.withClient(cmd, cf, func(ctx context.Context, c *client.Client) error {
				page, err := webui.Handler(webui.Options{TemporalUI: temporalUI, Namespace: c.Namespace()})
				if err != nil {
					return usageErrorf("--temporal-ui: %w", err)
				}
				api, err := httpapi.New(httpapi.Options{Store: st, Control: c, Token: token, Page: page})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "serving the session API of %s on http://%s/v1/\n", st.Root(), ln.Addr())
				return api.Serve(ctx, ln)
			})
		},
	}
	cmd.Flags().StringVar(&addr, "http", "", "listen address: a bare port is 127.0.0.1:PORT; a non-loopback address needs --http-token")
	cmd.Flags().StringVar(&temporalUI, "temporal-ui", "", "address of the Temporal Web UI the web view links each session's workflow to, e.g. http://localhost:8233")
	cmd.Flags().StringVar(&token, "http-token", "", "bearer token every request must send (default $"+httpapi.EnvToken+")")
	sf.addRoot(cmd.Flags(), "store root directory (default $"+envRoot+")")
	cf = addConnFlags(cmd)
	return cmd
}
