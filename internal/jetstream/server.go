package jetstream

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process nats-server with JetStream.
type Server struct{ s *server.Server }

// ServerConfig configures Embedded.
type ServerConfig struct {
	StoreDir string // JetStream's store; under the Apodex home
	Host     string // default 127.0.0.1
	Port     int    // 0: 4222; -1: a random free port
}

// Embedded starts a single-node server with JetStream and waits until it
// accepts clients. Stop it with Shutdown.
func Embedded(cfg ServerConfig) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	s, err := server.NewServer(&server.Options{Host: cfg.Host, Port: cfg.Port, JetStream: true, StoreDir: cfg.StoreDir,
		NoSigs: true, NoLog: true, ServerName: "apodex-embedded"})
	if err != nil {
		return nil, fmt.Errorf("jetstream: embedded server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("jetstream: embedded server on %s:%d did not start; is the port taken? (try --nats embedded:PORT)", cfg.Host, cfg.Port)
	}
	return &Server{s: s}, nil
}

// URL is the client URL of the server.
func (s *Server) URL() string { return s.s.ClientURL() }

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}
