// prom-client's entry loads every part it has, among them a push gateway client
// (node:https and TLS) and, with the default metrics, OpenTelemetry: a third of what an
// HTTP thread loads at its start, for parts it never uses. So the parts are loaded
// themselves, each the module that prom-client's entry re-exports (the version is
// pinned); the process's own metrics only where they are asked for.
import { createRequire } from 'node:module';
import type * as Prometheus from 'prom-client';

const require = createRequire(import.meta.url);
export const Counter = require('prom-client/lib/counter') as typeof Prometheus.Counter;
export const Gauge = require('prom-client/lib/gauge') as typeof Prometheus.Gauge;
export const Histogram = require('prom-client/lib/histogram') as typeof Prometheus.Histogram;
export const Registry = require('prom-client/lib/registry') as typeof Prometheus.Registry;
export type Counter = Prometheus.Counter;
export type Histogram = Prometheus.Histogram;
