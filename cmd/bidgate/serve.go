package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"bidgate/gateway"
	"bidgate/persist"
	"bidgate/shard"
)

func migrate(ctx context.Context, cfg config) error {
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	db, err := persist.Open(ctx, cfg.PostgresURL, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := persist.Migrate(ctx, db)
	if err != nil {
		return err
	}
	log.Info("database migrated", "applied", applied)
	return nil
}

func serve(ctx context.Context, cfg config) error {
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	db, err := persist.Open(ctx, cfg.PostgresURL, int32(cfg.PostgresConns))
	if err != nil {
		return err
	}
	defer db.Close()
	if cfg.Migrate {
		applied, err := persist.Migrate(ctx, db)
		if err != nil {
			return err
		}
		log.Info("database migrated", "applied", applied)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := gateway.New(gateway.Config{RequestTimeout: cfg.RequestTimeout}, shard.New(db), db.Ping, reg, log)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("bidgate serving", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("bidgate stopped")
	return nil
}
