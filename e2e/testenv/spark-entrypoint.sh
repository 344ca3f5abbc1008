#!/bin/bash
# /opt/entrypoint.sh of the Debian-made stand-in for Apache Spark's official image (build-spark.sh),
# written for this project with the behaviour of Spark's own
# resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh, which is what
# Spark on Kubernetes relies on:
#   driver ARGS    spark-submit in client mode inside the driver pod, bound to the pod's address
#                  (SPARK_DRIVER_BIND_ADDRESS, set by Spark in the pod spec), ARGS from the
#                  submission (--properties-file ... --class ... the main file and its arguments)
#   executor       the JVM of KubernetesExecutorBackend with the memory, driver URL, executor id,
#                  cores, application id, pod IP, resource profile and pod name Spark puts in
#                  the executor pod's environment; SPARK_JAVA_OPT_<n> in order before them
#   anything else  run as given (pass-through)
# Every command runs under tini (-s: a subreaper, so Python workers are reaped). Classpath: conf
# dir first, then $SPARK_HOME/jars/*, SPARK_EXTRA_CLASSPATH, SPARK_DIST_CLASSPATH. An unknown uid
# gets a passwd entry through nss_wrapper (the JVM and Hadoop ask for the user name).
set -euo pipefail

if ! getent passwd "$(id -u)" >/dev/null 2>&1; then
  for wrapper in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    if [[ -s $wrapper ]]; then
      NSS_WRAPPER_PASSWD=$(mktemp)
      NSS_WRAPPER_GROUP=$(mktemp)
      printf 'spark:x:%s:%s:%s:%s:/bin/false\n' "$(id -u)" "$(id -g)" \
        "${SPARK_USER_NAME:-anonymous uid}" "$SPARK_HOME" >"$NSS_WRAPPER_PASSWD"
      printf 'spark:x:%s:\n' "$(id -g)" >"$NSS_WRAPPER_GROUP"
      export LD_PRELOAD=$wrapper NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
      break
    fi
  done
fi

: "${JAVA_HOME:=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${SPARK_HOME}/jars/*"
if [[ -n ${HADOOP_CONF_DIR:-} ]]; then classpath="$HADOOP_CONF_DIR:$classpath"; fi
if [[ -n ${SPARK_EXTRA_CLASSPATH:-} ]]; then classpath="$classpath:$SPARK_EXTRA_CLASSPATH"; fi
if [[ -n ${PYSPARK_PYTHON:-} ]]; then export PYSPARK_PYTHON; fi
if [[ -n ${PYSPARK_DRIVER_PYTHON:-} ]]; then export PYSPARK_DRIVER_PYTHON; fi

java_opts=()
while IFS= read -r name; do
  java_opts+=("${!name}")
done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)

case "${1:-}" in
  driver)
    shift
    command=("$SPARK_HOME/bin/spark-submit"
             --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}"
             --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}"
             --deploy-mode client "$@")
    ;;
  executor)
    shift
    command=("$JAVA_HOME/bin/java" "${java_opts[@]}"
             "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}"
             -cp "$classpath:${SPARK_DIST_CLASSPATH:-}"
             org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
             --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID"
             --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID"
             --hostname "$SPARK_EXECUTOR_POD_IP"
             --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
             --podName "$SPARK_EXECUTOR_POD_NAME")
    ;;
  *)
    command=("$@")
    ;;
esac
exec /usr/bin/tini -s -- "${command[@]}"
