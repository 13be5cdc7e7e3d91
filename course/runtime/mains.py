"""The main() of each stage's training script, as real code.

The notebook's script writer (course.notebook.scripts) copies one of these functions, renamed
main(), into the job's script after the student's functions, the way it copies those. So the
names below that this module does not define (make_iterators, build_trainer, ...) are the
student's functions, and chainer, L, harness and chainermn are the script's own imports
(course.notebook.scripts.IMPORTS). Nothing calls these functions from here.
"""
# ruff: noqa: F821  (the student's functions and the script's imports are defined in the script)


def single_gpu():
    args = harness.parse_args("single_gpu")
    device = chainer.get_device(harness.resolve_device(args.device))
    device.use()
    harness.set_seed(args.seed, device)  # the same seed gives the same weights, batches and dropout
    train, test = harness.load_data(args)
    train_iter, test_iter = make_iterators(train, test, args.batchsize)
    model, optimizer = make_model_and_optimizer(args, device)
    harness.add_weight_decay(optimizer)  # every stage's, so that their accuracies compare
    trainer = build_trainer(args, train_iter, test_iter, model, optimizer, device)
    add_snapshots(
        trainer
    )  # a job killed at its walltime leaves a snapshot the next job resumes from
    harness.apply_lr_rule(
        trainer, args, 1, None
    )  # one worker: args.lr, then the final drop, as every stage
    harness.run(trainer, args)


def multi_gpu():
    args = harness.parse_args("multi_gpu")
    gpu_ids = harness.gpus_for_multiprocess(args.gpus)  # counts GPUs without touching CUDA
    harness.set_seed(
        args.seed
    )  # CPU generators only: CUDA must stay untouched until the updater forks
    devices = make_devices(gpu_ids)
    train, test = harness.load_data(args)
    train_iters = make_train_iterators(train, args.batchsize, len(gpu_ids))
    model = L.Classifier(course.models.build(args.model, width=args.width))
    lr = scaled_learning_rate(args.lr, args.batchsize, args.batchsize * len(gpu_ids))
    optimizer = chainer.optimizers.MomentumSGD(lr)
    optimizer.setup(model)
    harness.add_weight_decay(optimizer)
    trainer = build_trainer(args, train_iters, test, model, optimizer, devices)
    harness.apply_lr_drop(
        trainer, args
    )  # the updater scaled the rate itself: only the final drop here
    harness.run(trainer, args, devices=gpu_ids)


def multi_node():
    args = harness.parse_args("multi_node")
    use_gpu = harness.use_gpu(args.gpu)
    comm = make_communicator(harness.communicator_name(args.communicator, use_gpu))
    device = chainer.get_device(device_for_rank(comm, use_gpu))
    device.use()
    # Each rank its own batches and dropout; the multi-node optimizer sends rank 0's weights to all.
    harness.set_seed(args.seed + comm.rank, device)
    # Only rank 0 reads the data; shard_datasets hands every rank its part.
    train, test = harness.load_data(args) if comm.rank == 0 else (None, None)
    train, test = shard_datasets(train, test, comm, args.seed)
    model = L.Classifier(course.models.build(args.model, width=args.width))
    model.to_device(device)
    optimizer = make_optimizer(args, comm, model)  # at args.lr, the rate for one worker's batch
    harness.add_weight_decay(optimizer)
    trainer = build_trainer(args, comm, train, test, model, optimizer, device)
    # --lr-rule: constant, linear (x comm.size at once) or warmup (your learning_rate_schedule);
    # then the drop
    harness.apply_lr_rule(trainer, args, comm.size, learning_rate_schedule)
    harness.run(trainer, args, comm=comm)
