//! `dlsched._core.Env` and `dlsched._core.VecEnv`: the learning
//! environment of `dlsched::experiment::env` for Python, stepped with the GIL
//! released, observations and masks as numpy arrays. `dlsched.gym` wraps
//! them as Gymnasium environments.

use std::sync::{Mutex, MutexGuard};

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use dlsched::experiment::env::{
    ActionMode, Env, EnvConfig, EpisodeSource, ObservationKind, RewardKind, RewardNorm, Split, VecEnv,
};

use crate::{err, run_err, run_spec};

/// The environment's own keywords (the rest are the workload's, as
/// `dlsched.simulate` takes them).
const ENV_KEYS: [&str; 13] = [
    "max_queue",
    "reward",
    "reward_norm",
    "oracle",
    "max_steps",
    "max_time_h",
    "observation",
    "action",
    "episodes",
    "window_jobs",
    "eval_share",
    "loads",
    "split",
];

/// A keyword's value, or `default` when absent or None.
fn get<T: for<'a, 'py> FromPyObject<'a, 'py>>(d: &Bound<'_, PyDict>, key: &str, default: T) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => v.extract::<T>().map_err(|e| {
            let e: PyErr = e.into();
            err(format!("{key}=: {e}"))
        }),
        _ => Ok(default),
    }
}

/// An environment of the keywords `kwargs`: the environment's own
/// ([`ENV_KEYS`], `dlsched.gym` documents them), the rest the workload's.
fn build(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Env> {
    let py_kw = match kwargs {
        Some(k) => k.copy()?,
        None => return build_from(None, None),
    };
    let own = PyDict::new(py_kw.py());
    for key in ENV_KEYS {
        if let Some(v) = py_kw.get_item(key)? {
            own.set_item(key, v)?;
            py_kw.del_item(key)?;
        }
    }
    build_from(Some(&own), Some(&py_kw))
}

fn build_from(own: Option<&Bound<'_, PyDict>>, workload: Option<&Bound<'_, PyDict>>) -> PyResult<Env> {
    let cfg = match own {
        Some(d) => config(d)?,
        None => EnvConfig::default(),
    };
    let (spec, _) = run_spec(workload)?;
    Env::new(spec, cfg).map_err(run_err)
}

/// The environment's settings from its keywords.
fn config(d: &Bound<'_, PyDict>) -> PyResult<EnvConfig> {
    let dflt = EnvConfig::default();
    let reward = RewardKind::parse(&get(d, "reward", "queue_delay".to_string())?).map_err(err)?;
    let reward_norm = RewardNorm::parse(&get(d, "reward_norm", "none".to_string())?).map_err(err)?;
    let observation = ObservationKind::parse(&get(d, "observation", "flat".to_string())?).map_err(err)?;
    let action = ActionMode::parse(&get(d, "action", "job".to_string())?).map_err(err)?;
    let loads: Option<(f64, f64)> = get(d, "loads", None)?;
    let episodes = match (get(d, "episodes", "spec".to_string())?.as_str(), loads) {
        ("spec", _) => EpisodeSource::Spec,
        ("windows", _) => {
            EpisodeSource::TraceWindows { jobs: get(d, "window_jobs", 256)?, eval_share: get(d, "eval_share", 0.2)? }
        }
        ("loads", Some((lo, hi))) => EpisodeSource::Loads { lo, hi },
        ("loads", None) => return Err(err("episodes=\"loads\": give loads=(lo, hi)")),
        (e, _) => return Err(err(format!("episodes=`{e}`: spec, windows or loads"))),
    };
    let split = match get(d, "split", "train".to_string())?.as_str() {
        "train" => Split::Train,
        "eval" => Split::Eval,
        s => return Err(err(format!("split=`{s}`: train or eval"))),
    };
    let max_time_h: Option<f64> = get(d, "max_time_h", None)?;
    if let Some(h) = max_time_h
        && !(h.is_finite() && h > 0.0)
    {
        return Err(err(format!("max_time_h={h}: a positive number of hours")));
    }
    Ok(EnvConfig {
        max_queue: get(d, "max_queue", dflt.max_queue)?,
        reward,
        reward_norm,
        oracle: get(d, "oracle", dflt.oracle)?,
        max_steps: get(d, "max_steps", dflt.max_steps)?,
        max_time_s: max_time_h.map(|h| h * 3600.0),
        observation,
        action,
        episodes,
        split,
    })
}

/// One environment: `reset`, `step`, the observation and mask as numpy
/// arrays (see `dlsched.gym.ClusterSchedulingEnv`, which wraps it).
#[pyclass(name = "Env", module = "dlsched._core")]
pub struct PyEnv {
    /// Behind a mutex: a Python object may be used from several threads.
    env: Mutex<Env>,
}

impl PyEnv {
    fn env(&self) -> PyResult<MutexGuard<'_, Env>> {
        self.env.lock().map_err(|_| err("the environment failed in another thread"))
    }
}

#[pymethods]
impl PyEnv {
    /// An environment: keywords as `dlsched.gym.ClusterSchedulingEnv`'s.
    #[new]
    #[pyo3(signature = (**kwargs))]
    fn new(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyEnv { env: Mutex::new(build(kwargs)?) })
    }

    /// Values per observation.
    #[getter]
    fn obs_len(&self) -> PyResult<usize> {
        Ok(self.env()?.obs_len())
    }

    /// Actions (wait last).
    #[getter]
    fn n_actions(&self) -> PyResult<usize> {
        Ok(self.env()?.n_actions())
    }

    /// Starts an episode (`seed`: its key; None draws the next). Returns
    /// (observation, ended before a decision).
    #[pyo3(signature = (seed=None))]
    fn reset<'py>(&mut self, py: Python<'py>, seed: Option<u64>) -> PyResult<(Bound<'py, PyArray1<f32>>, bool)> {
        let mut env = self.env()?;
        let e = &mut *env;
        let ended = py.detach(|| e.reset(seed)).map_err(run_err)?;
        Ok((PyArray1::from_slice(py, env.obs()), ended))
    }

    /// One action: (observation, reward, terminated, truncated).
    fn step<'py>(&mut self, py: Python<'py>, action: i64) -> PyResult<(Bound<'py, PyArray1<f32>>, f64, bool, bool)> {
        let mut env = self.env()?;
        let a =
            usize::try_from(action).map_err(|_| err(format!("action {action} is not in 0..{}", env.n_actions())))?;
        let e = &mut *env;
        let out = py.detach(|| e.step(a)).map_err(run_err)?;
        Ok((PyArray1::from_slice(py, env.obs()), out.reward, out.terminated, out.truncated))
    }

    /// The valid actions now (bool array, wait last).
    fn action_masks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        Ok(PyArray1::from_slice(py, self.env()?.mask()))
    }

    /// (simulated time s, waiting jobs, running jobs, steps, episode seed).
    fn status(&self) -> PyResult<Status> {
        let env = self.env()?;
        let (w, r) = env.counts();
        Ok((env.now_s(), w, r, env.steps(), env.episode_seed()))
    }

    /// The terminated episode's `summary.json` text, or None.
    fn summary_json(&self) -> PyResult<Option<String>> {
        Ok(self.env()?.summary_json())
    }

    /// The terminated episode's tables as `dlsched.simulate` returns them
    /// (summary JSON, {file name: CSV bytes}), or None.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<(String, Bound<'py, PyDict>)>> {
        let env = self.env()?;
        env.report().map(|r| crate::tables(py, r)).transpose()
    }
}

/// `num_envs` environments stepped together on the engine's threads (GIL
/// released); batched numpy arrays (see
/// `dlsched.gym.VectorClusterSchedulingEnv`).
#[pyclass(name = "VecEnv", module = "dlsched._core")]
pub struct PyVecEnv {
    venv: Mutex<VecEnv>,
}

/// A batch of observations (n, obs_len) and masks (n, actions).
type Batch<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<bool>>);

/// An environment's status: (simulated time s, waiting jobs, running jobs,
/// steps, episode seed).
type Status = (f64, usize, usize, u64, u64);

/// What `VecEnv.step` returns: observations (n, obs_len) float32, rewards
/// (n,) float64, terminated and truncated (n,) bool, masks (n, actions)
/// bool, then per environment (index, final observation or None, summary
/// JSON or None, error or None) for those whose episode ended or failed.
type VecStep<'py> = (
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyArray1<bool>>,
    Bound<'py, PyArray2<bool>>,
    Vec<(usize, Option<Bound<'py, PyArray1<f32>>>, Option<String>, Option<String>)>,
);

impl PyVecEnv {
    fn venv(&self) -> PyResult<MutexGuard<'_, VecEnv>> {
        self.venv.lock().map_err(|_| err("the environments failed in another thread"))
    }

    fn batch<'py>(py: Python<'py>, venv: &VecEnv) -> PyResult<Batch<'py>> {
        let envs = venv.envs();
        let (n, d, a) = (envs.len(), envs[0].obs_len(), envs[0].n_actions());
        let mut obs = Vec::with_capacity(n * d);
        let mut mask = Vec::with_capacity(n * a);
        for e in envs {
            obs.extend_from_slice(e.obs());
            mask.extend_from_slice(e.mask());
        }
        let obs = PyArray1::from_vec(py, obs).reshape([n, d]).map_err(err)?;
        let mask = PyArray1::from_vec(py, mask).reshape([n, a]).map_err(err)?;
        Ok((obs, mask))
    }
}

#[pymethods]
impl PyVecEnv {
    /// `num_envs` environments of the same keywords (as
    /// `dlsched.gym.ClusterSchedulingEnv`'s), each its own episode stream;
    /// `same_step`: autoreset in the step that ends an episode.
    #[new]
    #[pyo3(signature = (num_envs, same_step=false, **kwargs))]
    fn new(num_envs: usize, same_step: bool, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        if num_envs == 0 || num_envs > dlsched::experiment::env::MAX_ENVS {
            return Err(err(format!("num_envs={num_envs}: 1 to {}", dlsched::experiment::env::MAX_ENVS)));
        }
        let envs = (0..num_envs).map(|_| build(kwargs)).collect::<PyResult<Vec<_>>>()?;
        Ok(PyVecEnv { venv: Mutex::new(VecEnv::new(envs, same_step).map_err(run_err)?) })
    }

    /// Environments.
    #[getter]
    fn num_envs(&self) -> PyResult<usize> {
        Ok(self.venv()?.envs().len())
    }

    /// Values per observation.
    #[getter]
    fn obs_len(&self) -> PyResult<usize> {
        Ok(self.venv()?.envs()[0].obs_len())
    }

    /// Actions (wait last).
    #[getter]
    fn n_actions(&self) -> PyResult<usize> {
        Ok(self.venv()?.envs()[0].n_actions())
    }

    /// Resets every environment (`seeds[i]` for the i-th; None draws).
    /// Returns (observations, masks).
    fn reset<'py>(&mut self, py: Python<'py>, seeds: Vec<Option<u64>>) -> PyResult<Batch<'py>> {
        let mut venv = self.venv()?;
        let v = &mut *venv;
        py.detach(|| v.reset(&seeds)).map_err(run_err)?;
        Self::batch(py, &venv)
    }

    /// Steps every environment with its action (autoreset).
    fn step<'py>(&mut self, py: Python<'py>, actions: Vec<i64>) -> PyResult<VecStep<'py>> {
        let mut venv = self.venv()?;
        let n = venv.envs().len();
        if actions.len() != n {
            return Err(err(format!("actions: {} given for {n} environments", actions.len())));
        }
        let actions: Vec<usize> = actions.into_iter().map(|a| usize::try_from(a).unwrap_or(usize::MAX)).collect();
        let v = &mut *venv;
        let outs = py.detach(|| v.step(&actions));
        let (obs, mask) = Self::batch(py, &venv)?;
        let mut rewards = Vec::with_capacity(n);
        let mut term = Vec::with_capacity(n);
        let mut trunc = Vec::with_capacity(n);
        let mut ended = Vec::new();
        for (i, o) in outs.into_iter().enumerate() {
            rewards.push(o.out.reward);
            term.push(o.out.terminated);
            trunc.push(o.out.truncated);
            if o.final_obs.is_some() || o.final_summary.is_some() || o.error.is_some() {
                ended.push((i, o.final_obs.map(|v| PyArray1::from_vec(py, v)), o.final_summary, o.error));
            }
        }
        Ok((
            obs,
            PyArray1::from_vec(py, rewards),
            PyArray1::from_vec(py, term),
            PyArray1::from_vec(py, trunc),
            mask,
            ended,
        ))
    }

    /// The valid actions of every environment now, (n, actions) bool.
    fn action_masks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<bool>>> {
        Ok(Self::batch(py, &*self.venv()?)?.1)
    }

    /// Per environment: (simulated time s, waiting, running, steps, episode seed).
    fn status(&self) -> PyResult<Vec<Status>> {
        Ok(self
            .venv()?
            .envs()
            .iter()
            .map(|e| {
                let (w, r) = e.counts();
                (e.now_s(), w, r, e.steps(), e.episode_seed())
            })
            .collect())
    }
}
