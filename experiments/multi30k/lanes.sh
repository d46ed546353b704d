# Sourced by screen.sh and full.sh: jobs of `run.py` that can be stopped and run again.
#   job FOLDER OVERRIDE...   run.py OVERRIDE... into FOLDER, its output in FOLDER.log
#   lanes JOBS_OF_LANE_0 JOBS_OF_LANE_1   (each a function name) side by side, then wait
# A job whose FOLDER has metrics.json is done and skipped; one with FOLDER/checkpoints/last.ckpt is
# resumed from it (bit for bit). Each job runs on one thread (OMP_NUM_THREADS=1): two lanes, two cores;
# JOB_THREADS=2 job ... for a job that runs alone. A resumed job's output follows the earlier one's.
# PYTHON: the interpreter (default: the project's .venv, else python).
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}

job() {
  local folder=$1 resume=() status
  shift
  if [ -f "$folder/metrics.json" ]; then
    echo "$folder: done, skipped" >&2
    return 0
  fi
  [ -f "$folder/checkpoints/last.ckpt" ] && resume=("ckpt_path=$folder/checkpoints/last.ckpt")
  mkdir -p "$(dirname "$folder")"
  OMP_NUM_THREADS=${JOB_THREADS:-1} "$PYTHON" run.py "$@" progress=false "hydra.run.dir=$folder" "${resume[@]}" \
    >> "$folder.log" 2>&1
  status=$?
  echo "$folder: exit $status${resume:+ (resumed)}" >&2
  return "$status"
}

lanes() {
  "$1" &
  "$2" &
  wait
}
