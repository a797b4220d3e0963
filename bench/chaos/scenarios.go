//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// scenario is one fault injected under load.
type scenario struct {
	name string
	// load is how long the bench offers bids; the fault must fit in it
	// with time left to see the recovery.
	load time.Duration
	// at is when the fault starts, after the bench announced the load
	// (the load itself starts within 2 s of the announcement).
	at time.Duration
	// readyzHolds: every node's GET /readyz must stay 200 from the fault's
	// start to the end of the load (Kafka trouble must not fail
	// readiness).
	readyzHolds bool
	// redis is the Redis the stack runs on (zero: one server).
	redis redisSetup
	// lossReported: acknowledged bids the fault loses are counted and
	// reported, not failed on. Without --redis-wait-replicas a Redis
	// failover may lose what the old primary acknowledged and had not sent
	// to its replica; the scenario tells how many.
	lossReported bool
	inject       func(ctx context.Context, s *stack, tl *timeline) error
}

// scenarios are run in this order by TestChaos.
var scenarios = []scenario{
	{name: "broker-kill", load: 30 * time.Second, at: 10 * time.Second, readyzHolds: true, inject: brokerKill(0)},
	{name: "broker-outage-60s", load: 90 * time.Second, at: 10 * time.Second, readyzHolds: true, inject: brokerKill(60 * time.Second)},
	{name: "node-kill", load: 30 * time.Second, at: 10 * time.Second, inject: nodeKill},
	{name: "redis-kill", load: 30 * time.Second, at: 10 * time.Second, inject: redisKill},
	{name: "postgres-stop", load: 35 * time.Second, at: 8 * time.Second, inject: postgresStop(10 * time.Second)},
	{name: "rolling-restart", load: 40 * time.Second, at: 5 * time.Second, inject: rollingRestart},
	{name: "redis-failover", load: 30 * time.Second, at: 10 * time.Second,
		redis: redisSetup{cluster: true, waitReplicas: 1}, inject: redisFailover},
	{name: "redis-failover-nowait", load: 30 * time.Second, at: 10 * time.Second,
		redis: redisSetup{cluster: true}, lossReported: true, inject: redisFailover},
}

// hold keeps a fault in place for d: a deliberate timer, not a wait for
// something that could be awaited.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hold the fault: %w", ctx.Err())
	}
}

// brokerKill is kill -9 of the broker, down for d, then started again on
// the same port: a new, empty broker (every message the old one held is
// gone) with the topics created afresh.
func brokerKill(d time.Duration) func(context.Context, *stack, *timeline) error {
	return func(ctx context.Context, s *stack, tl *timeline) error {
		tl.begin("kill -9 broker")
		if err := s.broker.kill(ctx); err != nil {
			return err
		}
		tl.mark("broker exited")
		if err := hold(ctx, d); err != nil {
			return err
		}
		tl.mark("start broker")
		if err := s.restartStore(ctx, s.broker, brokerReadyLine); err != nil {
			return err
		}
		tl.finish("broker listening")
		return nil
	}
}

// nodeKill is kill -9 of the last node (not the seed the others joined
// through), restarted with the same flags.
func nodeKill(ctx context.Context, s *stack, tl *timeline) error {
	n := s.nodes[len(s.nodes)-1]
	tl.begin("kill -9 " + n.id)
	if err := n.proc.kill(ctx); err != nil {
		return err
	}
	tl.mark(n.id + " exited; start it")
	if err := s.restartNode(ctx, n); err != nil {
		return err
	}
	tl.finish(n.id + " ready")
	return nil
}

// redisKill is kill -9 of Redis, started again on its append-only file.
func redisKill(ctx context.Context, s *stack, tl *timeline) error {
	tl.begin("kill -9 redis")
	if err := s.redis.kill(ctx); err != nil {
		return err
	}
	tl.mark("redis exited; start it on its AOF")
	if err := s.restartStore(ctx, s.redis, redisReadyLine); err != nil {
		return err
	}
	tl.finish("redis ready")
	return nil
}

// postgresStop is pg_ctl stop -m fast, down for d, then started again.
func postgresStop(d time.Duration) func(context.Context, *stack, *timeline) error {
	return func(ctx context.Context, s *stack, tl *timeline) error {
		tl.begin("pg_ctl stop -m fast")
		if err := s.pg.stop(ctx, "fast"); err != nil {
			return err
		}
		tl.mark("postgres stopped")
		if err := hold(ctx, d); err != nil {
			return err
		}
		tl.mark("start postgres")
		if err := s.pg.start(ctx); err != nil {
			return err
		}
		tl.finish("postgres ready")
		return nil
	}
}

// rollingRestart sends SIGTERM to each node in turn, waits for its exit,
// starts it again and waits until it is ready before the next one.
func rollingRestart(ctx context.Context, s *stack, tl *timeline) error {
	tl.begin("rolling restart")
	for _, n := range s.nodes {
		tl.mark("SIGTERM " + n.id)
		// Generous: the node leaves, then drains (--shutdown-timeout 15s).
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := n.proc.signal(sctx, syscall.SIGTERM)
		cancel()
		if err != nil {
			return fmt.Errorf("%s did not stop on SIGTERM: %w", n.id, err)
		}
		tl.mark(fmt.Sprintf("%s exited (%s)", n.id, exitText(n.proc.exitErr())))
		if err := n.proc.exitErr(); err != nil {
			tl.problem("%s did not stop cleanly on SIGTERM: %v", n.id, err)
		}
		if err := s.restartNode(ctx, n); err != nil {
			return err
		}
		tl.mark(n.id + " ready")
	}
	tl.finish("all nodes restarted")
	return nil
}
