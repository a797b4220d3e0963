package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

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

func openRedis(ctx context.Context, cfg config) (redis.UniversalClient, error) {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:    strings.Split(cfg.RedisAddrs, ","),
		Password: cfg.RedisPassword,
	})
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("reach Redis at %s (is it running? see README): %w", cfg.RedisAddrs, err)
	}
	return rdb, nil
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

	rdb, err := openRedis(ctx, cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Shard.Log = log
	shards := shard.New(db, rdb, cfg.Shard, reg)
	ready := func(ctx context.Context) error {
		if err := db.Ping(ctx); err != nil {
			return fmt.Errorf("PostgreSQL: %w", err)
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		return nil
	}
	if cfg.OperatorToken == "" {
		log.Warn("no --operator-token: operator routes (promote) are open to every client")
	}
	srv := gateway.New(gateway.Config{RequestTimeout: cfg.RequestTimeout, OperatorToken: cfg.OperatorToken}, shards, ready, reg, log)

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
