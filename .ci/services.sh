#!/usr/bin/env bash
# Installs and starts the real brokers the driver tests talk to, on loopback
# only and on ports no default installation uses:
#
#   mosquitto          MQTT   127.0.0.1:18831
#   mosquitto          MQTT   127.0.0.1:18833  (a second one that tests kill and start again)
#   ActiveMQ 5.17      MQTT   127.0.0.1:18832
#   redis-server       Redis  127.0.0.1:16379
#   rabbitmq-server    AMQP 0-9-1 and AMQP 1.0  127.0.0.1:15682, management HTTP 127.0.0.1:15683
#                      (node planrun-test@localhost; its state is wiped at every start)
#   nats-server 2.9    NATS   127.0.0.1:14222  (JetStream; monitoring on 127.0.0.1:18222)
#
# and installs prometheus-node-exporter, which a collector test starts on a
# port of its own.
#
# Run as root on Debian 12. Idempotent: a service whose port already answers
# is left alone. Everything it says goes to stderr; stdout carries only the
# `export` lines, so CI can do:
#
#   eval "$(bash .ci/services.sh)"
#
# State (configs, logs, pid files, data) lives in $PLANRUN_SERVICES_DIR
# (default /var/lib/planrun-services). Stop everything with
#   bash .ci/services.sh stop
set -euo pipefail

exec 3>&1 1>&2

STATE=${PLANRUN_SERVICES_DIR:-/var/lib/planrun-services}
MOSQUITTO_PORT=18831
MOSQUITTO_RESTART_PORT=18833
ACTIVEMQ_PORT=18832
REDIS_PORT=16379
ACTIVEMQ_BOOT_TIMEOUT=${ACTIVEMQ_BOOT_TIMEOUT:-90}
RABBITMQ_PORT=15682
RABBITMQ_MGMT_PORT=15683
RABBITMQ_NODE=planrun-test@localhost
RABBITMQ_BOOT_TIMEOUT=${RABBITMQ_BOOT_TIMEOUT:-90}
NATS_PORT=14222
NATS_MONITOR_PORT=18222

log() { printf 'services: %s\n' "$*"; }
die() {
	printf 'services: error: %s\n' "$*"
	exit 1
}

# port_open reports whether something accepts TCP connections on 127.0.0.1:$1.
port_open() {
	(exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_port waits up to $2 seconds for 127.0.0.1:$1 to accept; $3 is a pid
# that must stay alive meanwhile (optional).
wait_port() {
	local port=$1 timeout=$2 pid=${3:-} i
	for ((i = 0; i < timeout * 4; i++)); do
		port_open "$port" && return 0
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.25
	done
	return 1
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() {
	local f=$1 pid i
	alive "$f" || {
		rm -f "$f"
		return 0
	}
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 80; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$f"
}

# rabbitmq_env prints the environment of the test node: directories of its
# own (owned by user rabbitmq), its node name, ports and plugins, so that
# it never touches a system instance (node rabbit@HOST on 5672).
rabbitmq_env() {
	local dir=$STATE/rabbitmq
	echo RABBITMQ_NODENAME=$RABBITMQ_NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$RABBITMQ_PORT \
		RABBITMQ_DIST_PORT=$((RABBITMQ_PORT + 20000)) \
		RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/rabbitmq" \
		RABBITMQ_PID_FILE="$dir/rabbitmq.pid" HOME=/var/lib/rabbitmq
}

# stop_rabbitmq stops the test node, if it runs, and waits for it (bounded).
stop_rabbitmq() {
	local dir=$STATE/rabbitmq
	[[ -f $dir/rabbitmq.pid ]] || return 0
	if alive "$dir/rabbitmq.pid"; then
		# shellcheck disable=SC2046
		env $(rabbitmq_env) timeout 60 rabbitmqctl -n $RABBITMQ_NODE shutdown >/dev/null 2>&1 || true
	fi
	stop_pidfile "$dir/rabbitmq.pid"
}

# NATS: Debian's nats-server (2.9) with JetStream in $STATE/nats. It has
# no daemon mode: it runs as a background job with a pid file.
install_nats() {
	dpkg-query -W -f='${Status}' nats-server 2>/dev/null | grep -q 'install ok installed' && return 0
	log "installing nats-server"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nats-server ||
		die "apt-get install nats-server failed"
}

start_nats() {
	local dir=$STATE/nats bin
	if port_open $NATS_PORT; then
		log "nats-server: 127.0.0.1:$NATS_PORT already answers"
		return 0
	fi
	bin=$(command -v nats-server || echo /usr/sbin/nats-server)
	[[ -x $bin ]] || die "nats-server not found"
	mkdir -p "$dir/jetstream"
	log "nats-server: starting on 127.0.0.1:$NATS_PORT (monitoring $NATS_MONITOR_PORT)"
	(
		ulimit -n 65536 2>/dev/null || true
		exec setsid "$bin" -a 127.0.0.1 -p $NATS_PORT -m $NATS_MONITOR_PORT -js -sd "$dir/jetstream" \
			-P "$dir/nats-server.pid" </dev/null >"$dir/nats-server.log" 2>&1 3>&-
	) 3>&- &
	local pid=$!
	if ! wait_port $NATS_PORT 20 "$pid" || ! wait_port $NATS_MONITOR_PORT 10 "$pid"; then
		tail -n 20 "$dir/nats-server.log" || true
		die "nats-server did not start; see $dir/nats-server.log"
	fi
}

stop_nats() { stop_pidfile "$STATE/nats/nats-server.pid"; }

# Chromium: the browser tests (internal/browser) open the HTML report and
# the live page in Debian's chromium, headless; fonts-liberation gives its
# pages and screenshots their text. No service: only the packages.
install_chromium() {
	local missing=() p
	for p in chromium fonts-liberation; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		{ apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } ||
		die "apt-get install ${missing[*]} failed"
}

if [[ ${1:-start} == stop ]]; then
	stop_pidfile "$STATE/mosquitto/mosquitto.pid"
	stop_pidfile "$STATE/mosquitto-restart/mosquitto.pid"
	stop_pidfile "$STATE/activemq/activemq.pid"
	stop_pidfile "$STATE/redis/redis.pid"
	stop_rabbitmq
	stop_nats
	log "stopped"
	exit 0
fi

[[ $(id -u) == 0 ]] || die "run as root (it installs packages)"

install_packages() {
	local pkgs=(mosquitto mosquitto-clients redis-server activemq libmqtt-client-java prometheus-node-exporter rabbitmq-server) missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Keep the packages' own services (mosquitto on 1883, redis on 6379)
	# from starting: the tests use private instances on other ports.
	local made_policy=0
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		made_policy=1
	fi
	local rc=0
	apt-get update -q || rc=$?
	if ((rc == 0)); then
		apt-get install -y -q --no-install-recommends "${missing[@]}" || rc=$?
	fi
	((made_policy)) && rm -f /usr/sbin/policy-rc.d
	((rc == 0)) || die "apt-get failed ($rc)"
}

# mosquitto_conf writes the config of a mosquitto in $1 listening on port
# $2; further lines come from $3.
# max_queued_messages/max_inflight_messages 0 = no limit, so QoS 1 bursts
# and persistent sessions are not trimmed by the broker.
mosquitto_conf() {
	local dir=$1 port=$2 extra=${3:-}
	mkdir -p "$dir"
	cat >"$dir/mosquitto.conf" <<EOF
pid_file $dir/mosquitto.pid
persistence false
log_dest file $dir/mosquitto.log
log_type error
log_type warning
connection_messages false
listener $port 127.0.0.1
allow_anonymous true
max_queued_messages 0
max_inflight_messages 0
max_connections -1
$extra
EOF
	if id mosquitto >/dev/null 2>&1; then
		chown -R mosquitto: "$dir"
	fi
}

# start_mosquitto starts the mosquitto in $1 on port $2 unless the port
# already answers; $3 names it in messages.
start_mosquitto() {
	local dir=$1 port=$2 what=$3
	if port_open "$port"; then
		log "$what: 127.0.0.1:$port already answers"
		return 0
	fi
	rm -f "$dir/mosquitto.pid"
	log "$what: starting on 127.0.0.1:$port"
	(
		ulimit -n 65536 2>/dev/null || true
		# 3>&- everywhere: a daemon holding the stdout pipe open would keep
		# $(bash .ci/services.sh) waiting forever.
		mosquitto -c "$dir/mosquitto.conf" -d 3>&-
	)
	wait_port "$port" 20 || die "$what did not start; see $dir/mosquitto.log"
}

start_redis() {
	local dir=$STATE/redis
	if port_open $REDIS_PORT; then
		log "redis: 127.0.0.1:$REDIS_PORT already answers"
		return 0
	fi
	mkdir -p "$dir"
	log "redis: starting on 127.0.0.1:$REDIS_PORT"
	redis-server --port $REDIS_PORT --bind 127.0.0.1 --daemonize yes --save '' --appendonly no \
		--dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" 3>&-
	wait_port $REDIS_PORT 20 || die "redis-server did not start; see $dir/redis.log"
}

# find_jar prints the first /usr/share/java jar whose name matches $1
# (unversioned name preferred).
find_jar() {
	local f
	for f in "/usr/share/java/$1.jar" /usr/share/java/"$1"-[0-9]*.jar; do
		[[ -f $f ]] && {
			echo "$f"
			return 0
		}
	done
	return 1
}

start_activemq() {
	local dir=$STATE/activemq home=/usr/share/activemq
	if port_open $ACTIVEMQ_PORT; then
		log "activemq: 127.0.0.1:$ACTIVEMQ_PORT already answers"
		return 0
	fi
	[[ -f $home/bin/activemq.jar ]] || die "activemq: $home/bin/activemq.jar missing"
	[[ -e $home/lib/activemq-mqtt.jar ]] || die "activemq: $home/lib/activemq-mqtt.jar missing (the MQTT connector)"
	mkdir -p "$dir/conf" "$dir/lib" "$dir/data" "$dir/tmp"
	# The MQTT connector needs the FuseSource MQTT codec and HawtDispatch,
	# which the activemq package does not put on its class path; the
	# launcher adds ${activemq.base}/lib, so link them there.
	local j path
	for j in mqtt-client hawtdispatch hawtdispatch-transport hawtbuf; do
		path=$(find_jar "$j") || die "activemq: /usr/share/java/$j.jar not found (package libmqtt-client-java and its dependencies)"
		ln -sf "$path" "$dir/lib/$j.jar"
	done
	cat >"$dir/conf/activemq.xml" <<EOF
<beans xmlns="http://www.springframework.org/schema/beans"
       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
       xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd
                           http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="planrun-test"
          useJmx="false" persistent="false" advisorySupport="false"
          dataDirectory="$dir/data" schedulePeriodForDestinationPurge="0">
    <systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage limit="256 mb"/></memoryUsage>
        <tempUsage><tempUsage limit="1 gb"/></tempUsage>
      </systemUsage>
    </systemUsage>
    <transportConnectors>
      <transportConnector name="mqtt" uri="mqtt://127.0.0.1:$ACTIVEMQ_PORT?maximumConnections=100000&amp;wireFormat.maxFrameSize=104857600"/>
    </transportConnectors>
  </broker>
</beans>
EOF
	# Debian builds ActiveMQ against log4j 1.2: warnings and errors to the log.
	cat >"$dir/conf/log4j.properties" <<EOF
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d %-5p [%c{1}] %m%n
EOF
	local java
	java=$(command -v java) || die "activemq: java not found"
	log "activemq: starting on 127.0.0.1:$ACTIVEMQ_PORT (boot takes a while)"
	(
		cd "$dir"
		ulimit -n 65536 2>/dev/null || true
		# The broker runs in the foreground of a background job, so its pid
		# is the java process itself.
		exec setsid "$java" -Xms64m -Xmx512m -Djava.awt.headless=true \
			--add-reads=java.xml=java.logging \
			--add-opens java.base/java.security=ALL-UNNAMED \
			--add-opens java.base/java.net=ALL-UNNAMED \
			--add-opens java.base/java.lang=ALL-UNNAMED \
			--add-opens java.base/java.util=ALL-UNNAMED \
			--add-opens java.naming/javax.naming.spi=ALL-UNNAMED \
			--add-opens java.base/java.util.concurrent=ALL-UNNAMED \
			--add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED \
			-Dactivemq.home="$home" -Dactivemq.base="$dir" -Dactivemq.conf="$dir/conf" \
			-Dactivemq.data="$dir/data" -Djava.io.tmpdir="$dir/tmp" \
			-Dlog4j.configuration="file:$dir/conf/log4j.properties" \
			-jar "$home/bin/activemq.jar" start "xbean:file:$dir/conf/activemq.xml" \
			</dev/null >"$dir/activemq.log" 2>&1 3>&-
	) 3>&- &
	local pid=$!
	echo "$pid" >"$dir/activemq.pid"
	if ! wait_port $ACTIVEMQ_PORT "$ACTIVEMQ_BOOT_TIMEOUT" "$pid"; then
		tail -n 40 "$dir/activemq.log" || true
		die "activemq did not open 127.0.0.1:$ACTIVEMQ_PORT within ${ACTIVEMQ_BOOT_TIMEOUT}s; see $dir/activemq.log"
	fi
}

# start_rabbitmq starts the test node with a fresh state directory (tests
# count messages in queues: a node keeping the last run's queues would
# skew them), with the management (HTTP on its own port) and AMQP 1.0
# plugins, and waits until it serves AMQP and HTTP, bounded.
start_rabbitmq() {
	local dir=$STATE/rabbitmq
	if port_open $RABBITMQ_PORT; then
		log "rabbitmq: 127.0.0.1:$RABBITMQ_PORT already answers"
		return 0
	fi
	# Where apt started the package's own node (rabbit@HOST on 5672), it is
	# left alone and never used.
	stop_rabbitmq
	rm -rf "$dir"
	mkdir -p "$dir/mnesia" "$dir/log"
	cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$RABBITMQ_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $RABBITMQ_MGMT_PORT
# The management API's counters every second, not every 5.
collect_statistics_interval = 1000
EOF
	echo '[rabbitmq_management,rabbitmq_amqp1_0].' >"$dir/enabled_plugins"
	chown -R rabbitmq: "$dir"
	log "rabbitmq: starting node $RABBITMQ_NODE on 127.0.0.1:$RABBITMQ_PORT (management on $RABBITMQ_MGMT_PORT)"
	(
		cd /var/lib/rabbitmq
		ulimit -n 65536 2>/dev/null || true
		# shellcheck disable=SC2046
		exec env $(rabbitmq_env) setsid runuser -u rabbitmq -- /usr/lib/rabbitmq/bin/rabbitmq-server \
			</dev/null >"$dir/log/startup.log" 2>&1 3>&-
	) 3>&- &
	local pid=$!
	if ! wait_port $RABBITMQ_PORT "$RABBITMQ_BOOT_TIMEOUT" "$pid" || ! wait_port $RABBITMQ_MGMT_PORT 30 "$pid"; then
		tail -n 40 "$dir/log/startup.log" || true
		die "rabbitmq did not open 127.0.0.1:$RABBITMQ_PORT and :$RABBITMQ_MGMT_PORT within ${RABBITMQ_BOOT_TIMEOUT}s; see $dir/log"
	fi
}

install_packages
install_chromium
mkdir -p "$STATE"
mosquitto_conf "$STATE/mosquitto" $MOSQUITTO_PORT
start_mosquitto "$STATE/mosquitto" $MOSQUITTO_PORT mosquitto
# The second mosquitto is the one tests kill (its pidfile) and start again
# (the same command); $SYS every second, so that a test reads the broker's
# own counters (mosquitto_sub) right after a run.
mosquitto_conf "$STATE/mosquitto-restart" $MOSQUITTO_RESTART_PORT "sys_interval 1"
start_mosquitto "$STATE/mosquitto-restart" $MOSQUITTO_RESTART_PORT "mosquitto (restartable)"
start_redis
start_activemq
start_rabbitmq
install_nats
start_nats
log "all services up (state in $STATE; stop with: bash .ci/services.sh stop)"

cat >&3 <<EOF
export PLANRUN_TEST_MOSQUITTO=tcp://127.0.0.1:$MOSQUITTO_PORT
export PLANRUN_TEST_ACTIVEMQ=tcp://127.0.0.1:$ACTIVEMQ_PORT
export PLANRUN_TEST_REDIS=127.0.0.1:$REDIS_PORT
export PLANRUN_TEST_MOSQUITTO_RESTART=tcp://127.0.0.1:$MOSQUITTO_RESTART_PORT
export PLANRUN_TEST_MOSQUITTO_RESTART_PIDFILE=$STATE/mosquitto-restart/mosquitto.pid
export PLANRUN_TEST_MOSQUITTO_RESTART_START='mosquitto -c $STATE/mosquitto-restart/mosquitto.conf -d'
export PLANRUN_TEST_RABBITMQ=amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/
export PLANRUN_TEST_RABBITMQ_MGMT=http://127.0.0.1:$RABBITMQ_MGMT_PORT
export PLANRUN_TEST_RABBITMQ_NODE=$RABBITMQ_NODE
export PLANRUN_TEST_AMQP=amqp://127.0.0.1:$RABBITMQ_PORT
export PLANRUN_TEST_NATS=nats://127.0.0.1:$NATS_PORT
export PLANRUN_TEST_NATS_MONITOR=http://127.0.0.1:$NATS_MONITOR_PORT
EOF
