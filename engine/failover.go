package engine

import (
	"context"
	"fmt"
	"time"
)

// A Redis primary that fails over to a replica (Sentinel, a cluster's master, a cloud VIP) may come
// back without the writes it acknowledged last: replication is asynchronous. Nothing in Redis says
// so — the markers that reveal a Redis that lost everything survive on the replica — so every
// instance watches the identity of the primaries it writes to, and when it changes rebuilds Redis
// from MySQL at once: every occupying booking counted, released and cancelled ones given back, holds
// confirmed meanwhile settled into their bookings, live holds let through on sold units ended, and
// the release tasks queued again. The rest of the work whose tasks may have vanished is driven from
// its MySQL rows by loops that run anyway: releases (the release loop reads due_at), reminders
// (remind_at), refunds (queueRefunds queues unsent ones every few seconds), deliveries
// (requeueDeliveries) and WeChat order closes (sweepOrders).

// watchPrimary is the failover watch's run (every SweepInterval, on every instance): it reads the
// primaries' identity and, when it changed since the last run, rebuilds from MySQL. The new identity
// is kept only once the rebuild succeeded, so that a failed one is tried again at the next run.
func (u *Upkeep) watchPrimary(ctx context.Context) error {
	id, err := u.rs.Identity(ctx)
	if err != nil || id == "" {
		return err
	}
	prev, _ := u.primary.Load().(string)
	if prev != "" && prev != id {
		if err := u.repairAfterFailover(ctx, prev, id); err != nil {
			return err
		}
	}
	u.primary.Store(id)
	return nil
}

// repairAfterFailover rebuilds Redis from MySQL after the primaries changed from prev to now. Every
// instance that notices repairs the counters (the part that makes holds safe again, idempotent, and
// what this instance must not serve without); one of them, under a lease, requeues the releases and
// checks the ledger.
func (u *Upkeep) repairAfterFailover(ctx context.Context, prev, now string) error {
	u.log.Warn("the Redis primary changed (a failover may have lost acknowledged writes); rebuilding Redis from MySQL now",
		"was", prev, "now", now)
	metricRepairs.WithLabelValues(repairRedisFailover).Inc()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failoverRepairTimeout)
	defer cancel()
	began := u.clock.Now()
	rep, err := u.RepairCounters(rctx)
	countRepairs(rep)
	if err != nil {
		return fmt.Errorf("rebuild after redis failover: %w", err)
	}
	u.log.Info("rebuilt Redis from MySQL after a failover", "took", u.clock.Now().Sub(began), "report", fmt.Sprintf("%+v", rep))
	lease := u.lease("failover_reconcile")
	held, err := lease.Hold(rctx, failoverRepairTimeout)
	if err != nil || !held {
		return err // another instance requeues; the counters here are repaired
	}
	defer func() { _ = lease.Release(context.WithoutCancel(rctx)) }()
	rest, err := u.ReconcileRest(rctx, ReconcileReport{})
	u.log.Info("reconciled after a Redis failover", "report", fmt.Sprintf("%+v", rest))
	return err
}

// failoverRepairTimeout bounds a rebuild after a failover.
const failoverRepairTimeout = time.Minute

// sweepOrders queues the closing of WeChat Pay orders whose hold ended unpaid a while ago and that
// are still open: their close task was lost (Redis lost it, or the process died before queuing it).
// Orders whose deadline is long past are left alone: WeChat refuses to take payment past an order's
// time_expire, which is the hold's deadline.
func (u *Upkeep) sweepOrders(ctx context.Context) error {
	if _, ok := u.sched.(PaymentScheduler); !ok || u.wechatPay == nil {
		return nil
	}
	now := u.clock.Now()
	orders, err := u.ss.OpenOrders(ctx, now.Add(-orderSweepWindow), now.Add(-orderCloseSlack), 500)
	if err != nil {
		return err
	}
	for _, o := range orders {
		u.payments.closeOrderOf(ctx, o.HoldID, o.OutTradeNo)
	}
	return nil
}

const (
	// orderCloseSlack is how long after its hold's deadline an order may stay open before the sweep
	// queues its closing: the wheel closes it within a second or two.
	orderCloseSlack = 10 * time.Second
	// orderSweepWindow is how far back the sweep looks.
	orderSweepWindow = time.Hour
)
