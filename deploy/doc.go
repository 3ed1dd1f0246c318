// Package deploy holds the container deployment of sessionflow: a Docker Compose stack
// (docker-compose.yml) that runs PostgreSQL, the Temporal server with its schema and namespace
// setup jobs, the Temporal Web UI and the sessionflow worker built from Dockerfile, with the
// session store on a named volume. The package has no Go API; its tests load the Compose file
// with the Compose specification's own loader and check the stack's wiring without a Docker
// engine.
package deploy
