//! `experiments`: the fault experiments (C4). Not built yet: see issue "experiments".

fn main() {
    eprintln!("experiments: not implemented yet in this version of fencepost (tracked as the experiments issue)");
    std::process::exit(2);
}
