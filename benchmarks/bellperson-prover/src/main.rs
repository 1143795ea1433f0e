//! Real Groth16 (bellperson, BLS12-381, CPU) prover fixture for memory profiling.
//!
//!   prover params FILE LOG2      -> generate random params for a 2^LOG2 circuit, write to FILE
//!   prover prove  FILE LOG2 N    -> read params from FILE (Parameters::read), make N proofs, verify each
//!   prover serve  FILE LOG2 SOCK [N] -> a proving daemon: read params once, then a proof for
//!                                   each connection to the Unix socket SOCK, answered with one
//!                                   line; after N proofs it exits (a tracer then writes its data)
//!   prover request SOCK          -> a client: asks the daemon for one proof, prints its answer
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use bellperson::groth16::{
    create_random_proof, generate_random_parameters, prepare_verifying_key, verify_proof,
    Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar as Fr};
use ff::Field;

/// Chain of squarings: x_{i+1} = x_i * x_i + i, one R1CS constraint per step.
/// The final value is the single public input.
/// Groth16 adds one extra constraint per public input (ONE + output = 2), so the
/// chain has 2^LOG2 - 2 steps and the QAP evaluation domain is exactly 2^LOG2.
#[derive(Clone)]
struct SquareChain {
    x0: Option<Fr>,
    steps: usize,
}

impl SquareChain {
    fn steps_for(log2: u32) -> usize {
        (1usize << log2) - 2
    }
    fn output(x0: Fr, steps: usize) -> Fr {
        let mut x = x0;
        for i in 0..steps {
            x = x.square() + Fr::from(i as u64);
        }
        x
    }
}

impl Circuit<Fr> for SquareChain {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut x_val = self.x0;
        let mut x = cs.alloc(|| "x0", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 0..self.steps {
            let c = Fr::from(i as u64);
            let next_val = x_val.map(|v| v.square() + c);
            let next = if i + 1 == self.steps {
                cs.alloc_input(|| "out", || next_val.ok_or(SynthesisError::AssignmentMissing))?
            } else {
                cs.alloc(|| "x", || next_val.ok_or(SynthesisError::AssignmentMissing))?
            };
            // x * x = next - i
            cs.enforce(
                || "sq",
                |lc| lc + x,
                |lc| lc + x,
                |lc| lc + next - (c, CS::one()),
            );
            x = next;
            x_val = next_val;
        }
        Ok(())
    }
}

/// The parameters from `file`: checked=false, as filecoin-proofs reads its trusted on-disk ones.
fn read_params(file: &str) -> Parameters<Bls12> {
    let r = BufReader::new(File::open(file).expect("open params file"));
    Parameters::read(r, false).expect("read params")
}

/// Proof `k` (its chain starts at 3 + k) made and verified: whether it verified.
fn prove_one(
    params: &Parameters<Bls12>,
    pvk: &bellperson::groth16::PreparedVerifyingKey<Bls12>,
    steps: usize,
    k: usize,
    rng: &mut impl rand_core::RngCore,
) -> bool {
    let x0 = Fr::from(3u64 + k as u64);
    let public = SquareChain::output(x0, steps);
    let circuit = SquareChain { x0: Some(x0), steps };
    let proof = create_random_proof(circuit, params, rng).expect("prove");
    verify_proof(pvk, &proof, &[public]).expect("verify")
}

fn usage() -> ! {
    eprintln!(
        "usage: prover params FILE LOG2 | prover prove FILE LOG2 N | prover serve FILE LOG2 SOCK [N] | prover request SOCK"
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "request" {
        let mut s = UnixStream::connect(&args[2]).expect("connect to the daemon's socket");
        s.write_all(b"prove\n").expect("send the request");
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).expect("read the answer");
        print!("{answer}");
        std::process::exit(if answer.starts_with("proof") { 0 } else { 1 });
    }
    if args.len() < 4 {
        usage();
    }
    let file = &args[2];
    let log2: u32 = args[3].parse().unwrap_or_else(|_| usage());
    let steps = SquareChain::steps_for(log2);
    let mut rng = rand::thread_rng();
    let mut out = std::io::stdout();

    match args[1].as_str() {
        "params" => {
            let t = Instant::now();
            let circuit = SquareChain { x0: None, steps };
            let params: Parameters<Bls12> =
                generate_random_parameters(circuit, &mut rng).expect("paramgen");
            let gen_s = t.elapsed().as_secs_f64();
            let mut w = BufWriter::new(File::create(file).expect("create params file"));
            params.write(&mut w).expect("write params");
            w.flush().unwrap();
            writeln!(
                out,
                "params 2^{} ({} chain constraints) generated in {:.1} s, written to {}",
                log2, steps, gen_s, file
            )
            .unwrap();
        }
        "prove" => {
            if args.len() < 5 {
                usage();
            }
            let n: usize = args[4].parse().unwrap_or_else(|_| usage());
            let t = Instant::now();
            let params = read_params(file);
            writeln!(out, "params read in {:.1} s", t.elapsed().as_secs_f64()).unwrap();
            out.flush().unwrap();
            let pvk = prepare_verifying_key(&params.vk);
            for k in 1..=n {
                let t = Instant::now();
                let ok = prove_one(&params, &pvk, steps, k, &mut rng);
                assert!(ok, "proof {} failed to verify", k);
                writeln!(out, "proof {} done in {:.1} s", k, t.elapsed().as_secs_f64()).unwrap();
                out.flush().unwrap();
            }
        }
        "serve" => {
            if args.len() < 5 {
                usage();
            }
            let sock = &args[4];
            let last: Option<usize> = args.get(5).map(|n| n.parse().unwrap_or_else(|_| usage()));
            let _ = std::fs::remove_file(sock);
            let t = Instant::now();
            let params = read_params(file);
            let pvk = prepare_verifying_key(&params.vk);
            // Bound only once the parameters are in: the socket says the daemon is ready.
            let listener = UnixListener::bind(sock).expect("bind the socket");
            writeln!(out, "params read in {:.1} s; serving on {}", t.elapsed().as_secs_f64(), sock).unwrap();
            out.flush().unwrap();
            for (k, conn) in listener.incoming().enumerate() {
                let mut conn = match conn {
                    Ok(c) => c,
                    Err(_) => continue,
                };
                let mut line = String::new();
                if BufReader::new(&conn).read_line(&mut line).is_err() {
                    continue;
                }
                let t = Instant::now();
                let ok = prove_one(&params, &pvk, steps, k + 1, &mut rng);
                let answer = if ok {
                    format!("proof {} done in {:.1} s\n", k + 1, t.elapsed().as_secs_f64())
                } else {
                    format!("proof {} failed to verify\n", k + 1)
                };
                let _ = conn.write_all(answer.as_bytes());
                write!(out, "{answer}").unwrap();
                out.flush().unwrap();
                if last == Some(k + 1) {
                    break;
                }
            }
            let _ = std::fs::remove_file(sock);
        }
        _ => usage(),
    }
}
